package bulkwire.cxf;

import jakarta.jws.WebMethod;
import jakarta.jws.WebParam;
import jakarta.jws.WebResult;
import jakarta.jws.WebService;
import jakarta.jws.soap.SOAPBinding;

/** The port type of bulkwire's GET /soap?wsdl, written by hand (no wsdl2java). */
@WebService(name = "MediaPortType", targetNamespace = Upload.NS)
@SOAPBinding(style = SOAPBinding.Style.DOCUMENT, use = SOAPBinding.Use.LITERAL,
        parameterStyle = SOAPBinding.ParameterStyle.BARE)
public interface Media {
    @WebMethod(operationName = "upload", action = "urn:bulkwire:media#upload")
    @WebResult(name = "uploadResponse", targetNamespace = Upload.NS, partName = "parameters")
    UploadResponse upload(
            @WebParam(name = "upload", targetNamespace = Upload.NS, partName = "parameters")
            Upload request);
}
