//! Namespace names the XML-RPC and SOAP/MTOM codecs look for, as resolved
//! by [`crate::Scope::resolve`].

/// The `xml` prefix, bound by definition (Namespaces in XML 1.0 §3).
pub const XML: &[u8] = b"http://www.w3.org/XML/1998/namespace";
/// The `xmlns` prefix and attribute, bound by definition.
pub const XMLNS: &[u8] = b"http://www.w3.org/2000/xmlns/";
/// SOAP 1.1 envelope (`Envelope`, `Header`, `Body`, `Fault`).
pub const SOAP11_ENV: &[u8] = b"http://schemas.xmlsoap.org/soap/envelope/";
/// SOAP 1.2 envelope.
pub const SOAP12_ENV: &[u8] = b"http://www.w3.org/2003/05/soap-envelope";
/// XOP (`{XOP}Include` with an `href` attribute naming a MIME part).
pub const XOP: &[u8] = b"http://www.w3.org/2004/08/xop/include";
/// XML-binary Optimized Packaging media type hints (`xmime:contentType`).
pub const XMIME: &[u8] = b"http://www.w3.org/2005/05/xmlmime";
/// XML Schema (`xs:base64Binary`).
pub const XSD: &[u8] = b"http://www.w3.org/2001/XMLSchema";
/// XML Schema instance (`xsi:type`, `xsi:nil`).
pub const XSI: &[u8] = b"http://www.w3.org/2001/XMLSchema-instance";
