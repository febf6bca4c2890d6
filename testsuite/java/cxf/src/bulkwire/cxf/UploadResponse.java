package bulkwire.cxf;

import jakarta.xml.bind.annotation.XmlAccessType;
import jakarta.xml.bind.annotation.XmlAccessorType;
import jakarta.xml.bind.annotation.XmlElement;
import jakarta.xml.bind.annotation.XmlRootElement;
import jakarta.xml.bind.annotation.XmlType;

/** The response wrapper. */
@XmlRootElement(name = "uploadResponse", namespace = Upload.NS)
@XmlAccessorType(XmlAccessType.FIELD)
@XmlType(name = "", propOrder = {"id", "url", "size", "sha256"})
public class UploadResponse {
    @XmlElement(namespace = "", required = true)
    public String id;

    @XmlElement(namespace = "", required = true)
    public String url;

    @XmlElement(namespace = "")
    public long size;

    @XmlElement(namespace = "", required = true)
    public String sha256;
}
