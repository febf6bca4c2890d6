package bulkwire.cxf;

import jakarta.activation.DataHandler;
import jakarta.xml.bind.annotation.XmlAccessType;
import jakarta.xml.bind.annotation.XmlAccessorType;
import jakarta.xml.bind.annotation.XmlElement;
import jakarta.xml.bind.annotation.XmlMimeType;
import jakarta.xml.bind.annotation.XmlRootElement;
import jakarta.xml.bind.annotation.XmlType;

/** The request wrapper: unqualified name, contentType, data (base64Binary). */
@XmlRootElement(name = "upload", namespace = Upload.NS)
@XmlAccessorType(XmlAccessType.FIELD)
@XmlType(name = "", propOrder = {"name", "contentType", "data"})
public class Upload {
    public static final String NS = "urn:bulkwire:media";

    @XmlElement(namespace = "", required = true)
    public String name;

    @XmlElement(namespace = "")
    public String contentType;

    /** A DataHandler, so that with MTOM on CXF streams it as an attachment. */
    @XmlElement(namespace = "", required = true)
    @XmlMimeType("application/octet-stream")
    public DataHandler data;
}
