//! The engine under `bulkwire.parse` (the iterator API for new code): a
//! parser fed one chunk at a time that answers with the chunk's events as
//! a list of small tuples, so Python makes one call per chunk instead of one
//! per event. The form-data rules of RFC 7578 apply when the media type is
//! `multipart/form-data` (every part has a `name`, text fields are capped),
//! RFC 2046 / RFC 2387 otherwise.
//!
//! Event tuples (the Python side turns ranges into `memoryview`s of the
//! chunk, so data is never copied):
//! `(0, name, filename, content_type, headers)` a part starts;
//! `(1, start, end)` data in the chunk; `(2, bytes)` data the parser held
//! back from an earlier chunk; `(3,)` the part ends; `(4,)` the body ends.

use crate::events::{self, Ev, Loc};
use crate::parser::{message, parse_error};
use bulkwire_multipart::{Limits, Parser};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

#[pyclass(module = "bulkwire._bulkwire", name = "Feeder")]
pub struct Feeder {
    /// Boxed for its alignment (see `MultipartParser::parser`).
    parser: Box<Parser>,
}

fn event<'py>(py: Python<'py>, ev: Ev) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let t = match ev {
        Ev::NeedMore => return Ok(None),
        Ev::PartStart { info, .. } => {
            let Some(i) = info else { return Ok(None) };
            let i = *i;
            (0, i.name, i.filename, i.content_type, i.headers).into_pyobject(py)?
        }
        Ev::Data(Loc::Input(r)) => (1, r.start, r.end).into_pyobject(py)?,
        Ev::Data(Loc::Owned(v)) => (2, PyBytes::new(py, &v)).into_pyobject(py)?,
        Ev::PartEnd => (3,).into_pyobject(py)?,
        Ev::End => (4,).into_pyobject(py)?,
    };
    Ok(Some(t))
}

#[pymethods]
impl Feeder {
    /// A parser for a body with this `Content-Type` header value; the
    /// keywords override [`Limits`] defaults (see the crate README).
    #[new]
    #[pyo3(signature = (content_type, *, max_parts = None, max_field_bytes = None,
        max_header_bytes = None, max_headers = None))]
    fn new(
        py: Python<'_>,
        content_type: &str,
        max_parts: Option<usize>,
        max_field_bytes: Option<u64>,
        max_header_bytes: Option<usize>,
        max_headers: Option<usize>,
    ) -> PyResult<Self> {
        let d = Limits::default();
        let lim = Limits {
            parts: max_parts.unwrap_or(d.parts),
            field_bytes: max_field_bytes.unwrap_or(d.field_bytes),
            header_bytes: max_header_bytes.unwrap_or(d.header_bytes),
            headers: max_headers.unwrap_or(d.headers),
            ..d
        };
        let parser = Parser::from_content_type(content_type, lim)
            .map_err(|e| parse_error(py, message(&e), e.offset() as i64, e.offset()))?;
        Ok(Feeder {
            parser: Box::new(parser),
        })
    }

    /// Parses `chunk` (a `bytes`) and returns its events; with `is_last`,
    /// also checks that the body was complete.
    fn feed<'py>(
        &mut self,
        chunk: &Bound<'py, PyBytes>,
        is_last: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let py = chunk.py();
        let input = chunk.as_bytes();
        let base = self.parser.offset();
        let out = PyList::empty(py);
        let mut pos = 0;
        loop {
            let ev =
                events::step(&mut self.parser, input, &mut pos, is_last, true).map_err(|e| {
                    parse_error(py, message(&e), e.offset() as i64 - base as i64, e.offset())
                })?;
            if matches!(ev, Ev::NeedMore) {
                return Ok(out);
            }
            if let Some(t) = event(py, ev)? {
                out.append(t)?;
            }
        }
    }

    /// True once the close delimiter has been read.
    #[getter]
    fn done(&self) -> bool {
        self.parser.is_done()
    }
}
