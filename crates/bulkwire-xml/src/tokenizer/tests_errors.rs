//! Error cases with exact offsets; each runs whole, byte by byte and at
//! random splits and must fail identically.

use crate::testutil::{all_ways, ErrorSummary};
use crate::{ErrorKind, LimitKind, Limits, Token, Tokenizer};
use ErrorKind::{Limit, Malformed, Truncated, Unsupported};

fn err_with(limits: &Limits, doc: &[u8]) -> ErrorSummary {
    let o = all_ways(limits, doc);
    o.error
        .unwrap_or_else(|| panic!("no error for {:?}", String::from_utf8_lossy(doc)))
}

fn err(doc: &[u8]) -> (ErrorKind, u64) {
    let (kind, at, _) = err_with(&Limits::default(), doc);
    (kind, at)
}

fn offset_of(doc: &[u8], needle: &[u8]) -> u64 {
    memchr::memmem::find(doc, needle).expect("needle") as u64
}

#[test]
fn dtd_and_declarations_are_refused() {
    assert_eq!(err(b"<!DOCTYPE a><a/>"), (Unsupported, 0));
    let doc = b"<?xml version=\"1.0\"?>\n<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>";
    assert_eq!(err(doc), (Unsupported, 22));
    assert_eq!(err(b"<a><!ENTITY x \"y\"></a>"), (Unsupported, 3));
    assert_eq!(err(b"<a><!ELEMENT a ANY></a>"), (Unsupported, 3));
    assert_eq!(err(b"<a><!x></a>"), (Malformed, 5));
    assert_eq!(err(b"<a><!-x></a>"), (Malformed, 6));
    assert_eq!(err(b"<a><![CDATx></a>"), (Malformed, 10));
    assert_eq!(err(b"<![CDATA[x]]><a/>"), (Malformed, 0));
}

#[test]
fn bad_references() {
    assert_eq!(err(b"<a>&foo;</a>"), (Malformed, 3));
    assert_eq!(err(b"<a>x&#0;</a>"), (Malformed, 4));
    assert_eq!(err(b"<a>&#xD800;</a>"), (Malformed, 3));
    assert_eq!(err(b"<a>&#x110000;</a>"), (Malformed, 3));
    assert_eq!(err(b"<a>&#xFFFE;</a>"), (Malformed, 3));
    assert_eq!(err(b"<a>&#8;</a>"), (Malformed, 3));
    assert_eq!(err(b"<a>&#12a;</a>"), (Malformed, 7));
    assert_eq!(err(b"<a>&lt</a>"), (Malformed, 6));
    assert_eq!(err(b"<a>& </a>"), (Malformed, 4));
    assert_eq!(err(b"<a>&#;</a>"), (Malformed, 5));
    assert_eq!(err(b"<a>&#000000000065;</a>"), (Malformed, 14));
    assert_eq!(err(b"<a b='&nbsp;'/>"), (Malformed, 6));
    assert_eq!(err(b"<a b='&amp'/>"), (Malformed, 10));
    assert_eq!(err(b"&amp;<a/>"), (Malformed, 0));
}

#[test]
fn structure() {
    assert_eq!(err(b"<a></b>"), (Malformed, 3));
    assert_eq!(err(b"<a><b></a></b>"), (Malformed, 6));
    assert_eq!(err(b"</a>"), (Malformed, 0));
    assert_eq!(err(b"<a/>x"), (Malformed, 4));
    assert_eq!(err(b"x<a/>"), (Malformed, 0));
    assert_eq!(err(b"<a/><b/>"), (Malformed, 4));
    assert_eq!(err(b"<a/></a>"), (Malformed, 4));
    assert_eq!(err(b" <?xml version='1.0'?><a/>"), (Malformed, 1));
    assert_eq!(err(b"<a/><?xml version='1.0'?>"), (Malformed, 4));
    assert_eq!(err(b"<a/><?XmL x?>"), (Malformed, 4));
    assert_eq!(err(b"\xEF\xBBx<a/>"), (Malformed, 2));
}

#[test]
fn tag_syntax() {
    assert_eq!(err(b"<a x=1/>"), (Malformed, 5));
    assert_eq!(err(b"<a x=\"<\"/>"), (Malformed, 6));
    assert_eq!(err(b"<a x=\"1\" x=\"2\"/>"), (Malformed, 9));
    assert_eq!(err(b"<a b=\"1\"c=\"2\"/>"), (Malformed, 8));
    assert_eq!(err(b"<a x/>"), (Malformed, 4));
    assert_eq!(err(b"<a/ >"), (Malformed, 3));
    assert_eq!(err(b"< a/>"), (Malformed, 1));
    assert_eq!(err(b"<1/>"), (Malformed, 1));
    assert_eq!(err(b"<a><></a>"), (Malformed, 4));
    assert_eq!(err(b"<a></>"), (Malformed, 5));
    assert_eq!(err(b"<a></a x>"), (Malformed, 7));
    assert_eq!(err(b"<a <b>"), (Malformed, 3));
    assert_eq!(err(b"<a:b:c/>"), (Malformed, 4));
    assert_eq!(err(b"<:a/>"), (Malformed, 1));
    assert_eq!(err(b"<?1?><a/>"), (Malformed, 2));
    assert_eq!(err(b"<?pi<x?><a/>"), (Malformed, 4));
}

#[test]
fn namespaces() {
    assert_eq!(err(b"<p:a/>"), (Malformed, 1));
    assert_eq!(err(b"<a p:x='1'/>"), (Malformed, 3));
    assert_eq!(err(b"<a><p:b xmlns:p='u'/><p:c/></a>"), (Malformed, 22));
    assert_eq!(err(b"<a xmlns:p=''/>"), (Malformed, 3));
    assert_eq!(err(b"<a xmlns:xmlns='u'/>"), (Malformed, 3));
    assert_eq!(err(b"<a xmlns:xml='u'/>"), (Malformed, 3));
    let doc = b"<a xmlns:x='http://www.w3.org/XML/1998/namespace'/>";
    assert_eq!(err(doc), (Malformed, 3));
    let ok = b"<xml:a xmlns:xml='http://www.w3.org/XML/1998/namespace'/>";
    assert_eq!(all_ways(&Limits::default(), ok).error, None);
}

#[test]
fn declaration_and_encoding() {
    let doc = b"<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><a/>";
    assert_eq!(err(doc), (Unsupported, offset_of(doc, b"ISO")));
    assert_eq!(err(b"\xFF\xFE<\0a\0/\0>\0"), (Unsupported, 0));
    assert_eq!(err(b"\xFE\xFF\0<"), (Unsupported, 0));
    assert_eq!(err(b"<?xml version=\"2.0\"?><a/>"), (Malformed, 15));
    assert_eq!(err(b"<?xml encoding=\"UTF-8\"?><a/>"), (Malformed, 6));
    assert_eq!(err(b"<?xml?><a/>"), (Malformed, 5));
    assert_eq!(
        err(b"<?xml version='1.0' standalone='maybe'?><a/>"),
        (Malformed, 32)
    );
    let doc = b"<?xml version='1.0' standalone='no' encoding='UTF-8'?><a/>";
    assert_eq!(err(doc), (Malformed, offset_of(doc, b"encoding")));
}

#[test]
fn truncated() {
    assert_eq!(err(b""), (Truncated, 0));
    assert_eq!(err(b"  "), (Truncated, 2));
    assert_eq!(err(b"<a>"), (Truncated, 3));
    assert_eq!(err(b"<a><b/>text"), (Truncated, 11));
    assert_eq!(err(b"<a><b"), (Truncated, 5));
    assert_eq!(err(b"<a><b x='>"), (Truncated, 10));
    assert_eq!(err(b"<a>&am"), (Truncated, 6));
    assert_eq!(err(b"<a><!-- x"), (Truncated, 9));
    assert_eq!(err(b"<a><![CDATA[x]]"), (Truncated, 15));
    assert_eq!(err(b"<a><![CDA"), (Truncated, 9));
    assert_eq!(err(b"<?xml"), (Truncated, 5));
    assert_eq!(err(b"\xEF\xBB"), (Truncated, 2));
}

#[test]
fn limits_are_named() {
    let lim = |f: fn(&mut Limits)| {
        let mut l = Limits::default();
        f(&mut l);
        l
    };
    let l = lim(|l| l.depth = 2);
    assert_eq!(
        err_with(&l, b"<a><b><c/></b></a>"),
        (Limit, 6, Some((LimitKind::Depth, 2)))
    );
    assert_eq!(all_ways(&l, b"<a><b/><b/></a>").error, None);
    let l = lim(|l| l.name_len = 4);
    assert_eq!(
        err_with(&l, b"<abcde/>"),
        (Limit, 5, Some((LimitKind::NameLen, 4)))
    );
    assert_eq!(
        err_with(&l, b"<abcd x12345='1'/>"),
        (Limit, 10, Some((LimitKind::NameLen, 4)))
    );
    assert_eq!(all_ways(&l, b"<abcd/>").error, None);
    let l = lim(|l| l.attrs = 2);
    assert_eq!(
        err_with(&l, b"<a x=\"1\" y=\"2\" z=\"3\"/>"),
        (Limit, 15, Some((LimitKind::Attrs, 2)))
    );
    let l = lim(|l| l.tag_bytes = 16);
    assert_eq!(
        err_with(&l, b"<a xxxxxxxxxxxxxxxxxxxx=\"1\"/>"),
        (Limit, 16, Some((LimitKind::TagBytes, 16)))
    );
    assert_eq!(
        err_with(&l, b"<a><?pi 123456789012345?></a>"),
        (Limit, 19, Some((LimitKind::TagBytes, 16)))
    );
    assert_eq!(all_ways(&l, b"<a xxxxxxx='1'/>").error, None);
    let l = lim(|l| l.elements = 3);
    assert_eq!(
        err_with(&l, b"<a><b/><c/><d/></a>"),
        (Limit, 11, Some((LimitKind::Elements, 3)))
    );
    let l = lim(|l| l.namespace_bytes = 10);
    assert_eq!(
        err_with(&l, b"<a xmlns:p='urn:abcdefghij'/>"),
        (Limit, 3, Some((LimitKind::NamespaceBytes, 10)))
    );
    assert_eq!(
        err_with(&l, b"<a xmlns:p='urn:a'><b xmlns:q='urn:b'/></a>"),
        (Limit, 22, Some((LimitKind::NamespaceBytes, 10)))
    );
    assert_eq!(
        all_ways(
            &l,
            b"<a xmlns:p='urn:a'><b xmlns:q='u'/><c xmlns:q='u'/></a>"
        )
        .error,
        None
    );
}

#[test]
fn errors_are_sticky_and_mapped() {
    let mut tk = Tokenizer::new(Limits::default());
    let mut rest = &b"<a></b>"[..];
    let e = loop {
        match tk.step(rest, true) {
            Ok(s) if matches!(s.event, Token::Start { .. }) => rest = &rest[s.consumed..],
            Ok(s) => panic!("unexpected {:?}", s.event),
            Err(e) => break e,
        }
    };
    assert_eq!(e.http_status(), 400);
    assert_eq!(tk.step(b"", true).unwrap_err(), e);
}
