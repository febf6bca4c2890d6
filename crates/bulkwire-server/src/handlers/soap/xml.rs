//! The XML the SOAP endpoint answers with: the `uploadResponse` envelope,
//! faults (SOAP 1.1 §4.4, SOAP 1.2 Part 1 §5.4) and the WSDL 1.1 document
//! (document/literal wrapped, WS-I Basic Profile 1.1 §4.7) with a SOAP 1.1
//! and a SOAP 1.2 binding (WSDL 1.1 §3, the W3C "WSDL 1.1 Binding Extension
//! for SOAP 1.2" note).
//!
//! All of it is small and written from fixed templates; every value from
//! elsewhere (ids, messages, the `Host` of the WSDL address) is escaped.

use crate::error::ApiError;
use bulkwire_xop::SoapVersion;
use std::fmt::Write;

/// The service namespace: `upload`, `uploadResponse` and `uploadFault`.
pub const NS: &str = "urn:bulkwire:media";

/// `Content-Type` of a SOAP message of this version (SOAP 1.1 §6.1.1,
/// SOAP 1.2 Part 2 §7.1.4 / RFC 3902).
pub fn content_type(v: SoapVersion) -> &'static str {
    match v {
        SoapVersion::Soap11 => "text/xml; charset=utf-8",
        SoapVersion::Soap12 => "application/soap+xml; charset=utf-8",
    }
}

/// Escapes text for element content and double-quoted attributes.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            // Not allowed in XML 1.0 (§2.2): dropped rather than sent.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => o.push(c),
        }
    }
    o
}

fn envelope(v: SoapVersion, body: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <env:Envelope xmlns:env=\"{}\"><env:Body>{body}</env:Body></env:Envelope>\n",
        v.namespace()
    )
}

/// What a successful `upload` returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    pub id: String,
    /// The item's link; `None` (no `url` element) for a principal without
    /// `read`, to whom links are not handed out.
    pub url: Option<String>,
    pub size: u64,
    pub sha256: String,
}

/// The `uploadResponse` envelope; its children are unqualified, like the
/// request's (the schema's default `elementFormDefault`).
pub fn response(v: SoapVersion, u: &Uploaded) -> String {
    let url = u
        .url
        .as_ref()
        .map(|l| format!("<url>{}</url>", escape(l)))
        .unwrap_or_default();
    let body = format!(
        "<m:uploadResponse xmlns:m=\"{NS}\"><id>{}</id>{url}<size>{}</size>\
         <sha256>{}</sha256></m:uploadResponse>",
        escape(&u.id),
        u.size,
        escape(&u.sha256)
    );
    envelope(v, &body)
}

/// The fault for `e`: `Client`/`Sender` when the request was at fault
/// (4xx), `Server`/`Receiver` otherwise (5xx). The detail repeats the
/// server's error kind and, for a limit, its name and value.
pub fn fault(v: SoapVersion, e: &ApiError) -> String {
    let client = e.status().is_client_error();
    let mut detail = format!(
        "<m:uploadFault xmlns:m=\"{NS}\"><kind>{}</kind>",
        e.kind.as_str()
    );
    if let Some((name, value)) = e.limit {
        let _ = write!(detail, "<limit>{name}</limit><value>{value}</value>");
    }
    detail.push_str("</m:uploadFault>");
    let reason = escape(&e.message);
    let body = match v {
        SoapVersion::Soap11 => {
            let code = if client { "Client" } else { "Server" };
            format!(
                "<env:Fault><faultcode>env:{code}</faultcode><faultstring>{reason}</faultstring>\
                 <detail>{detail}</detail></env:Fault>"
            )
        }
        SoapVersion::Soap12 => {
            let code = if client { "Sender" } else { "Receiver" };
            format!(
                "<env:Fault><env:Code><env:Value>env:{code}</env:Value></env:Code>\
                 <env:Reason><env:Text xml:lang=\"en\">{reason}</env:Text></env:Reason>\
                 <env:Detail>{detail}</env:Detail></env:Fault>"
            )
        }
    };
    envelope(v, &body)
}

/// The WSDL with both ports at `address` (e.g. `http://host:port/soap`).
///
/// `data` is `xs:base64Binary` with `xmime:expectedContentTypes` (W3C
/// "Describing Media Content of Binary Data in XML" §2.2), which tells MTOM
/// clients (CXF, Metro, .NET) to send it as an XOP attachment.
pub fn wsdl(address: &str) -> String {
    WSDL.replace("{ADDRESS}", &escape(address))
}

const WSDL: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<wsdl:definitions name="MediaService" targetNamespace="urn:bulkwire:media"
    xmlns:tns="urn:bulkwire:media"
    xmlns:wsdl="http://schemas.xmlsoap.org/wsdl/"
    xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/"
    xmlns:soap12="http://schemas.xmlsoap.org/wsdl/soap12/"
    xmlns:xs="http://www.w3.org/2001/XMLSchema"
    xmlns:xmime="http://www.w3.org/2005/05/xmlmime">
  <wsdl:documentation>bulkwire media upload: the file in data, as an MTOM/XOP attachment or inline base64; GET /v1/media/{id} reads it back.</wsdl:documentation>
  <wsdl:types>
    <xs:schema targetNamespace="urn:bulkwire:media" elementFormDefault="unqualified">
      <xs:element name="upload">
        <xs:complexType>
          <xs:sequence>
            <xs:element name="name" type="xs:string"/>
            <xs:element name="contentType" type="xs:string" minOccurs="0"/>
            <xs:element name="data" type="xs:base64Binary" xmime:expectedContentTypes="application/octet-stream"/>
          </xs:sequence>
        </xs:complexType>
      </xs:element>
      <xs:element name="uploadResponse">
        <xs:complexType>
          <xs:sequence>
            <xs:element name="id" type="xs:string"/>
            <xs:element name="url" type="xs:string" minOccurs="0"/>
            <xs:element name="size" type="xs:long"/>
            <xs:element name="sha256" type="xs:string"/>
          </xs:sequence>
        </xs:complexType>
      </xs:element>
      <xs:element name="uploadFault">
        <xs:complexType>
          <xs:sequence>
            <xs:element name="kind" type="xs:string"/>
            <xs:element name="limit" type="xs:string" minOccurs="0"/>
            <xs:element name="value" type="xs:long" minOccurs="0"/>
          </xs:sequence>
        </xs:complexType>
      </xs:element>
    </xs:schema>
  </wsdl:types>
  <wsdl:message name="uploadRequest">
    <wsdl:part name="parameters" element="tns:upload"/>
  </wsdl:message>
  <wsdl:message name="uploadResponse">
    <wsdl:part name="parameters" element="tns:uploadResponse"/>
  </wsdl:message>
  <wsdl:portType name="MediaPortType">
    <wsdl:operation name="upload">
      <wsdl:input message="tns:uploadRequest"/>
      <wsdl:output message="tns:uploadResponse"/>
    </wsdl:operation>
  </wsdl:portType>
  <wsdl:binding name="MediaSoap11" type="tns:MediaPortType">
    <soap:binding style="document" transport="http://schemas.xmlsoap.org/soap/http"/>
    <wsdl:operation name="upload">
      <soap:operation soapAction="urn:bulkwire:media#upload" style="document"/>
      <wsdl:input><soap:body use="literal"/></wsdl:input>
      <wsdl:output><soap:body use="literal"/></wsdl:output>
    </wsdl:operation>
  </wsdl:binding>
  <wsdl:binding name="MediaSoap12" type="tns:MediaPortType">
    <soap12:binding style="document" transport="http://schemas.xmlsoap.org/soap/http"/>
    <wsdl:operation name="upload">
      <soap12:operation soapAction="urn:bulkwire:media#upload" soapActionRequired="false" style="document"/>
      <wsdl:input><soap12:body use="literal"/></wsdl:input>
      <wsdl:output><soap12:body use="literal"/></wsdl:output>
    </wsdl:operation>
  </wsdl:binding>
  <wsdl:service name="MediaService">
    <wsdl:port name="MediaSoap11" binding="tns:MediaSoap11">
      <soap:address location="{ADDRESS}"/>
    </wsdl:port>
    <wsdl:port name="MediaSoap12" binding="tns:MediaSoap12">
      <soap12:address location="{ADDRESS}"/>
    </wsdl:port>
  </wsdl:service>
</wsdl:definitions>
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Kind;

    #[test]
    fn escape_covers_markup_quotes_and_controls() {
        assert_eq!(escape("a<b>&\"'\u{1}\n"), "a&lt;b&gt;&amp;&quot;&apos;\n");
    }

    #[test]
    fn faults_per_version_and_side() {
        let e = ApiError::limit("file_bytes", 10);
        let f = fault(SoapVersion::Soap11, &e);
        assert!(f.contains("<faultcode>env:Client</faultcode>"), "{f}");
        assert!(
            f.contains("<limit>file_bytes</limit><value>10</value>"),
            "{f}"
        );
        assert!(f.contains(SoapVersion::Soap11.namespace()));
        let e = ApiError::new(Kind::Storage, "disk <gone>");
        let f = fault(SoapVersion::Soap12, &e);
        assert!(f.contains("<env:Value>env:Receiver</env:Value>"), "{f}");
        assert!(f.contains("disk &lt;gone&gt;"), "{f}");
        assert!(!f.contains("<limit>"), "{f}");
    }

    #[test]
    fn response_escapes_values() {
        let mut u = Uploaded {
            id: "a&b".into(),
            url: Some("/v1/media/a&b".into()),
            size: 3,
            sha256: "00".into(),
        };
        let r = response(SoapVersion::Soap12, &u);
        assert!(r.contains("<id>a&amp;b</id><url>/v1/media/a&amp;b</url><size>3</size>"));
        assert!(r.contains(SoapVersion::Soap12.namespace()));
        u.url = None;
        let r = response(SoapVersion::Soap11, &u);
        assert!(r.contains("<id>a&amp;b</id><size>3</size>"), "{r}");
    }
}
