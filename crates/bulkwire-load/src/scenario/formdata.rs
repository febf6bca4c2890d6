//! The `formdata` scenario: `multipart/form-data` (RFC 7578) bodies from a
//! `bulkwire_multipart::Template`.
//!
//! Field values and filenames with `{seq}`/`{uuid}` become template slots;
//! everything else (boundary, delimiters, headers, static values, the file
//! bytes) is encoded once. A render costs one small buffer for the slot
//! values and refcount clones of the rest.

use super::{Payload, Scenario};
use crate::error::{Error, Result};
use crate::pattern::{Pattern, Vars};
use bulkwire_multipart::{Segment, Slot, Template, TemplateBuilder, Value};
use bytes::Bytes;
use std::cell::RefCell;
use std::io;

/// A file part: field name, filename pattern, content type and the bytes
/// (read once, shared by every request).
#[derive(Debug, Clone)]
pub struct FileSpec {
    pub field: String,
    pub filename: Pattern,
    pub content_type: Option<String>,
    pub data: Bytes,
}

/// A form template with its per-request patterns.
#[derive(Debug, Clone)]
pub struct FormData {
    template: Template,
    /// `slots[i]` renders `Slot(i)`.
    slots: Vec<Pattern>,
}

impl FormData {
    /// Text fields first, then files, in the order given.
    pub fn new(fields: &[(String, Pattern)], files: &[FileSpec]) -> Result<FormData> {
        let mut b = TemplateBuilder::new();
        let mut slots = Vec::new();
        for (name, value) in fields {
            let literal = value.literal();
            let v = value_of(value, literal.as_deref(), &mut slots);
            b.text(name, v);
        }
        for f in files {
            let literal = f.filename.literal();
            let v = value_of(&f.filename, literal.as_deref(), &mut slots);
            b.file_bytes(&f.field, v, f.content_type.as_deref(), f.data.clone());
        }
        let template = b
            .build()
            .map_err(|e| Error::config(format!("form-data template: {e}")))?;
        Ok(FormData { template, slots })
    }

    /// The underlying template (boundary, static length).
    pub fn template(&self) -> &Template {
        &self.template
    }
}

/// A static pattern goes into the template as bytes; a variable one gets the
/// next slot.
fn value_of<'a>(p: &Pattern, literal: Option<&'a str>, slots: &mut Vec<Pattern>) -> Value<'a> {
    match literal {
        Some(s) => Value::Static(s),
        None => {
            slots.push(p.clone());
            Value::Slot(Slot(slots.len() - 1))
        }
    }
}

thread_local! {
    /// Reused per worker thread, so a render allocates only the output.
    static SCRATCH: RefCell<(Vec<String>, Vec<Segment>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

impl Scenario for FormData {
    fn name(&self) -> &str {
        "formdata"
    }

    fn content_type(&self) -> &str {
        self.template.content_type()
    }

    fn render(&self, vars: &Vars) -> io::Result<Payload> {
        SCRATCH.with(|s| {
            let (values, segs) = &mut *s.borrow_mut();
            values.resize_with(self.slots.len(), String::new);
            for (v, p) in values.iter_mut().zip(&self.slots) {
                v.clear();
                p.render(vars, v);
            }
            let len = self.template.render_into(&values[..], segs)?;
            let mut out = Vec::with_capacity(segs.len());
            for seg in segs.drain(..) {
                match seg {
                    Segment::Bytes(b) => out.push(b),
                    // Files are given as bytes, so a template never holds one.
                    other => return Err(io::Error::other(format!("unexpected segment {other:?}"))),
                }
            }
            Ok(Payload { segments: out, len })
        })
    }
}
