package bulkwire.cxf;

import jakarta.activation.DataHandler;
import jakarta.activation.FileDataSource;
import jakarta.xml.ws.BindingProvider;
import jakarta.xml.ws.Service;
import jakarta.xml.ws.soap.MTOMFeature;
import jakarta.xml.ws.soap.SOAPFaultException;
import java.io.File;
import java.net.URL;
import javax.xml.namespace.QName;

/**
 * Uploads a file to bulkwire's SOAP endpoint with the Apache CXF JAX-WS
 * client, MTOM enabled (threshold 0: data always goes as an XOP
 * attachment), HTTP Basic through BindingProvider.
 *
 * <p>usage: CxfUpload WSDL_URL USER PASSWORD FILE {11|12}. Prints the
 * uploadResponse as JSON; on a SOAP fault prints {"fault": code} and exits 3.
 */
public final class CxfUpload {
    public static void main(String[] args) throws Exception {
        String wsdl = args[0];
        File file = new File(args[3]);
        String port = args[4].equals("12") ? "MediaSoap12" : "MediaSoap11";
        Service svc = Service.create(new URL(wsdl), new QName(Upload.NS, "MediaService"));
        Media media = svc.getPort(new QName(Upload.NS, port), Media.class, new MTOMFeature(true, 0));
        BindingProvider bp = (BindingProvider) media;
        bp.getRequestContext().put(BindingProvider.USERNAME_PROPERTY, args[1]);
        bp.getRequestContext().put(BindingProvider.PASSWORD_PROPERTY, args[2]);
        Upload req = new Upload();
        req.name = file.getName();
        req.contentType = "application/x-cxf";
        req.data = new DataHandler(new FileDataSource(file));
        try {
            UploadResponse r = media.upload(req);
            System.out.printf("{\"id\":\"%s\",\"url\":\"%s\",\"size\":%d,\"sha256\":\"%s\"}%n",
                    r.id, r.url, r.size, r.sha256);
        } catch (SOAPFaultException e) {
            String code = e.getFault().getFaultCodeAsQName().getLocalPart();
            System.out.printf("{\"fault\":\"%s\"}%n", code);
            System.exit(3);
        }
    }
}
