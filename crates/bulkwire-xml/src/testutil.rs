//! Drives a tokenizer over chunked input and records owned tokens, for tests
//! here, in `tests/` and in the codecs built on this crate (public but
//! hidden).

use crate::{ErrorKind, LimitKind, Limits, Token, Tokenizer};

/// An owned token; consecutive text tokens are merged so that any chunking
/// of the same document yields the same list. Names are resolved:
/// `ns` is the namespace URI of the element.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owned {
    Decl {
        version: Vec<u8>,
        encoding: Option<Vec<u8>>,
    },
    Start {
        name: Vec<u8>,
        empty: bool,
        attrs: Vec<(Vec<u8>, Vec<u8>)>,
        ns: Option<Vec<u8>>,
    },
    End {
        name: Vec<u8>,
        ns: Option<Vec<u8>>,
    },
    Text(Vec<u8>),
    Eof,
}

impl Owned {
    /// A compact rendering for table tests: `<a x="1">`, `<b/>`, `</a>`,
    /// `{urn:x}` before a name in a namespace, text as is.
    pub fn render(&self) -> String {
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let ns = |n: &Option<Vec<u8>>| n.as_ref().map(|u| format!("{{{}}}", s(u)));
        match self {
            Owned::Decl { version, encoding } => {
                let enc = encoding.as_ref().map(|e| format!(" {}", s(e)));
                format!("<?xml {}{}?>", s(version), enc.unwrap_or_default())
            }
            Owned::Start {
                name,
                empty,
                attrs,
                ns: uri,
            } => {
                let mut out = format!("<{}{}", ns(uri).unwrap_or_default(), s(name));
                for (k, v) in attrs {
                    out += &format!(" {}=\"{}\"", s(k), s(v));
                }
                out + if *empty { "/>" } else { ">" }
            }
            Owned::End { name, ns: uri } => {
                format!("</{}{}>", ns(uri).unwrap_or_default(), s(name))
            }
            Owned::Text(t) => s(t),
            Owned::Eof => "EOF".to_string(),
        }
    }
}

/// An error summarised as (kind, offset, limit), comparable across runs.
pub type ErrorSummary = (ErrorKind, u64, Option<(LimitKind, u64)>);

/// What tokenizing a whole document gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub tokens: Vec<Owned>,
    /// The token offset of each run of text (merged text tokens): where
    /// an error about the text points, so the same however the input is cut.
    pub text_starts: Vec<u64>,
    pub error: Option<ErrorSummary>,
    pub peak_buffered: usize,
}

impl Outcome {
    /// Tokens rendered, without white-space-only text.
    pub fn rendered(&self) -> Vec<String> {
        self.tokens
            .iter()
            .filter(|t| !matches!(t, Owned::Text(x) if x.iter().all(|b| b.is_ascii_whitespace())))
            .map(Owned::render)
            .collect()
    }
}

fn own(tokens: &mut Vec<Owned>, t: Token<'_>) {
    let v = |b: &[u8]| b.to_vec();
    let owned = match t {
        Token::Decl { version, encoding } => Owned::Decl {
            version: v(version),
            encoding: encoding.map(v),
        },
        Token::Start {
            name,
            empty,
            attrs,
            ns,
        } => Owned::Start {
            name: v(name),
            empty,
            attrs: attrs.iter().map(|a| (v(a.name), v(a.value))).collect(),
            ns: ns.resolve(name).0.map(v),
        },
        Token::End { name, ns } => Owned::End {
            name: v(name),
            ns: ns.resolve(name).0.map(v),
        },
        Token::Text(d) => {
            assert!(!d.is_empty(), "empty text token");
            if let Some(Owned::Text(prev)) = tokens.last_mut() {
                prev.extend_from_slice(d);
                return;
            }
            Owned::Text(d.to_vec())
        }
        Token::Eof => Owned::Eof,
        Token::NeedMore => return,
    };
    tokens.push(owned);
}

/// Feeds `doc` cut at `splits` (sorted offsets) to a tokenizer with `limits`.
pub fn run_split(limits: &Limits, doc: &[u8], splits: &[usize]) -> Outcome {
    let mut tk = Tokenizer::new(limits.clone());
    let mut tokens = Vec::new();
    let mut text_starts = Vec::new();
    let mut bounds: Vec<usize> = splits.iter().copied().filter(|&s| s < doc.len()).collect();
    bounds.push(doc.len());
    let mut start = 0;
    let mut error = None;
    'chunks: for (i, &end) in bounds.iter().enumerate() {
        let is_last = i + 1 == bounds.len();
        let mut chunk = &doc[start..end.max(start)];
        loop {
            match tk.step(chunk, is_last) {
                Err(e) => {
                    error = Some((e.kind(), e.offset(), e.limit_exceeded()));
                    break 'chunks;
                }
                Ok(step) => {
                    chunk = &chunk[step.consumed..];
                    match step.event {
                        Token::NeedMore => {
                            assert!(chunk.is_empty(), "NeedMore with input left");
                            assert!(!is_last, "NeedMore at the end");
                            break;
                        }
                        Token::Eof => {
                            assert!(chunk.is_empty(), "Eof with input left");
                            own(&mut tokens, Token::Eof);
                            break 'chunks;
                        }
                        t => {
                            let new_run = matches!(t, Token::Text(_))
                                && !matches!(tokens.last(), Some(Owned::Text(_)));
                            own(&mut tokens, t);
                            if new_run {
                                text_starts.push(tk.token_offset());
                            }
                        }
                    }
                }
            }
        }
        start = end.max(start);
    }
    Outcome {
        tokens,
        text_starts,
        error,
        peak_buffered: tk.peak_buffered_bytes(),
    }
}

/// Whole document in one slice.
pub fn run_whole(limits: &Limits, doc: &[u8]) -> Outcome {
    run_split(limits, doc, &[])
}

/// One byte at a time.
pub fn run_bytewise(limits: &Limits, doc: &[u8]) -> Outcome {
    let splits: Vec<usize> = (1..doc.len()).collect();
    run_split(limits, doc, &splits)
}

/// `n` random cut points from a small deterministic generator (xorshift),
/// so failures are reproducible from the seed.
pub fn random_splits(len: usize, n: usize, seed: u64) -> Vec<usize> {
    let mut x = seed | 1;
    let mut v: Vec<usize> = (0..n)
        .map(|_| {
            x = xorshift(x);
            (x % (len as u64 + 1)) as usize
        })
        .collect();
    v.sort_unstable();
    v
}

/// One step of xorshift64.
pub fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// Runs `doc` whole, byte by byte and at random splits; asserts the tokens,
/// where text runs start, and the error agree, and returns the whole run.
pub fn all_ways(limits: &Limits, doc: &[u8]) -> Outcome {
    let whole = run_whole(limits, doc);
    let bytewise = run_bytewise(limits, doc);
    assert_eq!(
        (&bytewise.tokens, &bytewise.text_starts, &bytewise.error),
        (&whole.tokens, &whole.text_starts, &whole.error),
        "bytewise differs for {:?}",
        String::from_utf8_lossy(doc)
    );
    for seed in 1..=40u64 {
        let splits = random_splits(doc.len(), 1 + seed as usize % 9, seed);
        let got = run_split(limits, doc, &splits);
        assert_eq!(
            (&got.tokens, &got.text_starts, &got.error),
            (&whole.tokens, &whole.text_starts, &whole.error),
            "splits {splits:?} differ for {:?}",
            String::from_utf8_lossy(doc)
        );
    }
    whole
}
