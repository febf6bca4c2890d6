//! The tokens a [`crate::Tokenizer`] step hands out. They borrow the
//! caller's input or the tokenizer's small buffers, and are valid until the
//! next step.

use super::scope::Scope;
use super::tag::{AttrLoc, ParsedTag};

/// What a step produced.
#[derive(Debug, Clone, Copy)]
pub enum Token<'a> {
    /// The XML declaration `<?xml version="1.0" encoding="UTF-8"?>`; other
    /// processing instructions are skipped without a token.
    Decl {
        version: &'a [u8],
        encoding: Option<&'a [u8]>,
    },
    /// A start tag. `empty` marks `<name/>`, which is followed by a
    /// synthetic [`Token::End`] at the next step, so every `Start` has its
    /// `End`.
    Start {
        /// The qualified name as written (`soap:Envelope`).
        name: &'a [u8],
        empty: bool,
        attrs: Attrs<'a>,
        /// Namespaces in scope, this tag's declarations included.
        ns: Scope<'a>,
    },
    /// An end tag, already checked against the open element.
    End {
        name: &'a [u8],
        /// Namespaces in scope, the closed element's declarations included.
        ns: Scope<'a>,
    },
    /// A piece of character data inside the root element, in document
    /// order: a run of the input (borrowed, never accumulated), the
    /// replacement of one reference, a piece of a CDATA section, or a line
    /// end normalized to `\n` (XML 1.0 §2.11). Never empty. White space
    /// between elements comes as text too; consumers skip it.
    Text(&'a [u8]),
    /// All input was consumed; call again with more (never returned when
    /// `is_last` was set).
    NeedMore,
    /// The document is complete and the input ended (`is_last`).
    Eof,
}

/// One step's result: bytes consumed from the input, and the token.
#[derive(Debug)]
pub struct Step<'a> {
    pub consumed: usize,
    pub event: Token<'a>,
}

/// The attributes of a start tag, in document order, namespace declarations
/// included. Values are normalized (XML 1.0 §3.3.3: references replaced,
/// literal white space as spaces).
#[derive(Clone, Copy)]
pub struct Attrs<'a> {
    tag: &'a [u8],
    parsed: &'a ParsedTag,
}

/// One attribute: qualified name as written, normalized value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr<'a> {
    pub name: &'a [u8],
    pub value: &'a [u8],
}

impl<'a> Attrs<'a> {
    pub(crate) fn new(tag: &'a [u8], parsed: &'a ParsedTag) -> Self {
        Attrs { tag, parsed }
    }

    pub fn len(&self) -> usize {
        self.parsed.attrs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parsed.attrs.is_empty()
    }

    /// The attributes in document order.
    pub fn iter(&self) -> impl Iterator<Item = Attr<'a>> + 'a {
        let (tag, parsed) = (self.tag, self.parsed);
        parsed.attrs.iter().map(move |a| attr(tag, parsed, a))
    }

    /// The value of the attribute with this qualified name, as written.
    pub fn get(&self, qname: &[u8]) -> Option<&'a [u8]> {
        self.iter().find(|a| a.name == qname).map(|a| a.value)
    }
}

fn attr<'a>(tag: &'a [u8], parsed: &'a ParsedTag, a: &AttrLoc) -> Attr<'a> {
    Attr {
        name: &tag[a.name.0 as usize..a.name.1 as usize],
        value: parsed.value_of(tag, a.value),
    }
}

impl std::fmt::Debug for Attrs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}
