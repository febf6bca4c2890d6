//! `bulkwire.MultipartParser`: python-multipart's `MultipartParser` API
//! (constructor, `write`, `finalize`, the `callbacks` dict and its names and
//! signatures) over bulkwire's sans-IO parser (RFC 2046 §5.1.1 body syntax).
//!
//! What a caller can rely on, and why it is built this way:
//! - `on_part_data(data, start, end)` gets the very `bytes` object passed to
//!   `write` with indices into it. Only the few bytes the parser held back
//!   across two writes (a possible delimiter prefix) arrive in a new small
//!   `bytes`. A `bytearray` or `memoryview` is copied once into `bytes`
//!   first: a callback could change a mutable buffer while the parser
//!   still reads it.
//! - The parser is borrowed only while it takes one step; every callback
//!   runs with it released, so a callback may call any method of the
//!   parser (PyO3 would otherwise raise "Already borrowed").
//! - A callback that raises stops `write` at once and the exception
//!   propagates unchanged (Starlette enforces `max_files`, `max_fields` and
//!   `max_part_size` that way).
//! - Parse errors are python-multipart's `MultipartParseError` when it is
//!   importable (so `except MultipartParseError` and Starlette's
//!   `except FormParserError` keep working), else `bulkwire`'s class of the
//!   same shape; `offset` is the index in the current `write`'s data, as in
//!   python-multipart, and `bulkwire_offset` the absolute one.
//! - The body is parsed as RFC 2046 multipart (python-multipart's class is
//!   not form-data specific either): a part without a `name` is left to the
//!   form layer (Starlette rejects it), and the parts count is unbounded as
//!   it is there (Starlette counts fields and files itself). Every buffer
//!   stays bounded: header block, preamble, epilogue, boundary length.

use crate::events::{self, Ev, Header, Loc};
use bulkwire_multipart::{Error, LimitKind, Limits, Parser, Subtype};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyMemoryView, PyString, PyType};
use pyo3::{intern, IntoPyObjectExt};

/// python-multipart's defaults (`DEFAULT_MAX_HEADER_COUNT`,
/// `DEFAULT_MAX_HEADER_SIZE`).
const DEFAULT_HEADER_COUNT: usize = 8;
const DEFAULT_HEADER_SIZE: usize = 4096 + 128;
/// The header buffer is allocated at its cap when a block straddles two
/// writes; a caller's huge `max_header_size` must not become a huge
/// allocation.
const HEADER_BYTES_CAP: usize = 1 << 20;

static PARSE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static FORM_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// A python-multipart-compatible streaming multipart parser.
#[pyclass(module = "bulkwire", name = "MultipartParser", dict, subclass)]
pub struct MultipartParser {
    /// Boxed: the parser's memmem searcher holds AVX2 vectors (32-byte
    /// alignment), and Python allocates objects 16-byte aligned; inline,
    /// an aligned vector load from it faults (it did, in a GPF).
    parser: Box<Parser>,
    /// The callbacks mapping, looked up again at every `write` (as
    /// python-multipart's `set_callback` may change it between writes).
    #[pyo3(get, set)]
    callbacks: Py<PyAny>,
    max_size: f64,
    /// Bytes accepted by `write` so far (python-multipart's `_current_size`).
    size: u64,
}

/// The callbacks of one `write`, resolved once.
#[derive(Default)]
struct Callbacks<'py> {
    part_begin: Option<Bound<'py, PyAny>>,
    part_data: Option<Bound<'py, PyAny>>,
    part_end: Option<Bound<'py, PyAny>>,
    header_begin: Option<Bound<'py, PyAny>>,
    header_field: Option<Bound<'py, PyAny>>,
    header_value: Option<Bound<'py, PyAny>>,
    header_end: Option<Bound<'py, PyAny>>,
    headers_finished: Option<Bound<'py, PyAny>>,
    end: Option<Bound<'py, PyAny>>,
}

impl<'py> Callbacks<'py> {
    fn lookup(map: &Bound<'py, PyAny>) -> PyResult<Self> {
        let py = map.py();
        if map.is_none() {
            return Ok(Callbacks::default());
        }
        let get = |name: &Bound<'py, PyString>| -> PyResult<Option<Bound<'py, PyAny>>> {
            let f = match map.cast::<PyDict>() {
                Ok(d) => d.get_item(name)?,
                Err(_) => Some(map.call_method1(intern!(py, "get"), (name,))?),
            };
            Ok(f.filter(|f| !f.is_none()))
        };
        Ok(Callbacks {
            part_begin: get(intern!(py, "on_part_begin"))?,
            part_data: get(intern!(py, "on_part_data"))?,
            part_end: get(intern!(py, "on_part_end"))?,
            header_begin: get(intern!(py, "on_header_begin"))?,
            header_field: get(intern!(py, "on_header_field"))?,
            header_value: get(intern!(py, "on_header_value"))?,
            header_end: get(intern!(py, "on_header_end"))?,
            headers_finished: get(intern!(py, "on_headers_finished"))?,
            end: get(intern!(py, "on_end"))?,
        })
    }
}

fn notify(f: &Option<Bound<'_, PyAny>>) -> PyResult<()> {
    if let Some(f) = f {
        f.call0()?;
    }
    Ok(())
}

/// Calls a data callback with `(data, start, end)`; like python-multipart,
/// never with an empty range.
fn data_cb(f: &Option<Bound<'_, PyAny>>, input: &Bound<'_, PyBytes>, loc: &Loc) -> PyResult<()> {
    let Some(f) = f else { return Ok(()) };
    if loc.is_empty() {
        return Ok(());
    }
    match loc {
        Loc::Input(r) => f.call1((input, r.start, r.end))?,
        Loc::Owned(v) => f.call1((PyBytes::new(f.py(), v), 0, v.len()))?,
    };
    Ok(())
}

/// The data of a `write`: a `bytes` as is, any other buffer copied once.
fn input_bytes<'py>(data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    if let Ok(b) = data.cast::<PyBytes>() {
        return Ok(b.clone());
    }
    let view = PyMemoryView::from(data)
        .map_err(|_| PyTypeError::new_err("write() takes bytes, bytearray or a buffer"))?;
    Ok(view
        .call_method0(intern!(data.py(), "tobytes"))?
        .cast_into::<PyBytes>()?)
}

/// A `MultipartParseError` (python-multipart's, else ours) for `msg` at
/// `offset` into the current write, with the absolute offset beside it.
pub fn parse_error(py: Python<'_>, msg: String, offset: i64, absolute: u64) -> PyErr {
    let make = || -> PyResult<PyErr> {
        let cls = PARSE_ERROR.import(py, "bulkwire._errors", "MultipartParseError")?;
        let kw = PyDict::new(py);
        kw.set_item("offset", offset.max(0))?;
        let e = cls.call((msg,), Some(&kw))?;
        e.setattr("bulkwire_offset", absolute)?;
        Ok(PyErr::from_value(e))
    };
    make().unwrap_or_else(|e| e)
}

fn form_error(py: Python<'_>, msg: String) -> PyErr {
    match FORM_ERROR.import(py, "bulkwire._errors", "FormParserError") {
        Ok(cls) => cls.call1((msg,)).map_or_else(|e| e, PyErr::from_value),
        Err(e) => e,
    }
}

/// The message of a parse error: python-multipart's wording first where
/// callers match on it, then bulkwire's own (limit name and value, offset).
pub fn message(e: &Error) -> String {
    let compat = match (e.limit_exceeded(), e.message()) {
        (Some((LimitKind::Headers, _)), _) => "Maximum header count exceeded: ",
        (Some((LimitKind::HeaderBytes, _)), _) => "Maximum header size exceeded: ",
        (_, "unexpected bytes after a boundary delimiter") => {
            "Did not find CRLF after boundary padding: "
        }
        _ => "",
    };
    format!("{compat}{e}")
}

fn boundary_bytes(b: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(s) = b.cast::<PyString>() {
        let enc = s.call_method1(intern!(b.py(), "encode"), ("latin-1",))?;
        return Ok(enc.cast_into::<PyBytes>()?.as_bytes().to_vec());
    }
    Ok(input_bytes(b)?.as_bytes().to_vec())
}

fn check_max_size(v: &Bound<'_, PyAny>) -> PyResult<f64> {
    let bad = || PyValueError::new_err(format!("max_size must be a positive number, not {v}"));
    if v.is_instance_of::<PyString>() || v.is_instance_of::<pyo3::types::PyBool>() {
        return Err(bad());
    }
    match v.extract::<f64>() {
        Ok(x) if x >= 1.0 => Ok(x),
        _ => Err(bad()),
    }
}

/// Limits for the drop-in parser: python-multipart's header count; the
/// header *block* bounded by `max_header_size` (python-multipart bounds
/// each line: with its defaults both accept what browsers send); parts
/// unbounded as there; bulkwire's preamble and epilogue caps.
fn limits(max_header_count: usize, max_header_size: usize) -> Limits {
    Limits {
        headers: max_header_count,
        header_bytes: max_header_size.saturating_add(2).min(HEADER_BYTES_CAP),
        parts: usize::MAX,
        field_bytes: u64::MAX,
        ..Limits::default()
    }
}

impl MultipartParser {
    /// How much of `len` more bytes `max_size` lets through (python-multipart
    /// truncates silently and returns the shorter length).
    fn room(&self, len: usize) -> usize {
        let total = self.size as f64 + len as f64;
        if total <= self.max_size {
            return len;
        }
        let left = (self.max_size - self.size as f64).max(0.0) as u64;
        usize::try_from(left).unwrap_or(usize::MAX).min(len)
    }

    fn error(&self, py: Python<'_>, e: &Error, base: u64) -> PyErr {
        let rel = e.offset() as i64 - base as i64;
        parse_error(py, message(e), rel, e.offset())
    }
}

/// Runs every event of `input[..take]` (or of the end of input when
/// `is_last`) through the callbacks, borrowing the parser one step at a time.
fn run(
    slf: &Bound<'_, MultipartParser>,
    input: &Bound<'_, PyBytes>,
    take: usize,
    is_last: bool,
) -> PyResult<()> {
    let py = slf.py();
    let cbs = Callbacks::lookup(slf.borrow().callbacks.bind(py))?;
    let bytes = &input.as_bytes()[..take];
    let base = slf.borrow().parser.offset();
    let mut pos = 0;
    loop {
        let ev = {
            let mut me = slf.try_borrow_mut()?;
            events::step(&mut me.parser, bytes, &mut pos, is_last, false)
                .map_err(|e| me.error(py, &e, base))?
        };
        match ev {
            Ev::NeedMore => return Ok(()),
            Ev::PartStart { headers, .. } => part_start(&cbs, input, &headers)?,
            Ev::Data(loc) => data_cb(&cbs.part_data, input, &loc)?,
            Ev::PartEnd => notify(&cbs.part_end)?,
            Ev::End => notify(&cbs.end)?,
        }
    }
}

/// python-multipart's sequence for a part's head: `part_begin`, then per
/// field `header_begin`, `header_field`, `header_value` (skipped when
/// empty), `header_end`, and finally `headers_finished`.
fn part_start(cbs: &Callbacks<'_>, input: &Bound<'_, PyBytes>, headers: &[Header]) -> PyResult<()> {
    notify(&cbs.part_begin)?;
    for h in headers {
        notify(&cbs.header_begin)?;
        data_cb(&cbs.header_field, input, &h.name)?;
        data_cb(&cbs.header_value, input, &h.value)?;
        notify(&cbs.header_end)?;
    }
    notify(&cbs.headers_finished)
}

#[pymethods]
impl MultipartParser {
    #[new]
    #[pyo3(signature = (boundary, callbacks = None, max_size = None, *,
        max_header_count = DEFAULT_HEADER_COUNT, max_header_size = DEFAULT_HEADER_SIZE))]
    fn new(
        py: Python<'_>,
        boundary: &Bound<'_, PyAny>,
        callbacks: Option<Py<PyAny>>,
        max_size: Option<&Bound<'_, PyAny>>,
        max_header_count: usize,
        max_header_size: usize,
    ) -> PyResult<Self> {
        let max_size = max_size.map_or(Ok(f64::INFINITY), check_max_size)?;
        let b = boundary_bytes(boundary)?;
        let lim = limits(max_header_count, max_header_size);
        let parser = Parser::new(&b, Subtype::Mixed, lim).map_err(|e| {
            let max = Limits::default().boundary_len;
            match e.limit_exceeded() {
                Some(_) => form_error(
                    py,
                    format!(
                        "Boundary length {} exceeds maximum of {max} (RFC 2046 §5.1.1)",
                        b.len()
                    ),
                ),
                None => form_error(py, format!("Invalid boundary {b:?}: {e}")),
            }
        })?;
        let callbacks = match callbacks {
            Some(c) => c,
            None => PyDict::new(py).into_any().unbind(),
        };
        Ok(MultipartParser {
            parser: Box::new(parser),
            callbacks,
            max_size,
            size: 0,
        })
    }

    /// Parses `data`, calling the callbacks; returns how many bytes were
    /// accepted (fewer only when `max_size` is reached).
    fn write(slf: &Bound<'_, Self>, data: &Bound<'_, PyAny>) -> PyResult<usize> {
        let input = input_bytes(data)?;
        let take = {
            let mut me = slf.try_borrow_mut()?;
            let take = me.room(input.as_bytes().len());
            me.size += take as u64;
            take
        };
        run(slf, &input, take, false)?;
        Ok(take)
    }

    /// Declares the end of the body. Unlike python-multipart, a body that
    /// stopped before its close delimiter is an error here (a truncated
    /// upload must not pass for a complete one).
    fn finalize(slf: &Bound<'_, Self>) -> PyResult<()> {
        let empty = PyBytes::new(slf.py(), b"");
        if slf.borrow().parser.is_done() {
            return Ok(());
        }
        run(slf, &empty, 0, true)
    }

    /// python-multipart's `BaseParser.close`: nothing to release.
    fn close(&self) {}

    /// python-multipart's `BaseParser.callback`: calls `on_<name>` if set.
    #[pyo3(signature = (name, data = None, start = None, end = None))]
    fn callback(
        &self,
        py: Python<'_>,
        name: &str,
        data: Option<Py<PyAny>>,
        start: Option<usize>,
        end: Option<usize>,
    ) -> PyResult<()> {
        let map = self.callbacks.bind(py);
        let f = map.call_method1(intern!(py, "get"), (format!("on_{name}"),))?;
        if f.is_none() {
            return Ok(());
        }
        match data {
            None => f.call0()?,
            Some(_) if start.is_some() && start == end => return Ok(()),
            Some(d) => f.call1((d, start, end))?,
        };
        Ok(())
    }

    /// python-multipart's `BaseParser.set_callback`; `None` removes it.
    fn set_callback(&self, py: Python<'_>, name: &str, func: Option<Py<PyAny>>) -> PyResult<()> {
        let map = self.callbacks.bind(py);
        let key = format!("on_{name}");
        match func {
            Some(f) => map.set_item(key, f),
            None => map
                .call_method1(intern!(py, "pop"), (key, py.None()))
                .map(drop),
        }
    }

    #[getter]
    fn get_max_size(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if self.max_size.is_finite() && self.max_size.fract() == 0.0 {
            return (self.max_size as u64).into_py_any(py);
        }
        self.max_size.into_py_any(py)
    }

    #[setter]
    fn set_max_size(&mut self, v: &Bound<'_, PyAny>) -> PyResult<()> {
        self.max_size = check_max_size(v)?;
        Ok(())
    }

    /// Absolute offset of the next byte the parser expects.
    #[getter]
    fn offset(&self) -> u64 {
        self.parser.offset()
    }

    /// True once the close delimiter has been read.
    #[getter]
    fn done(&self) -> bool {
        self.parser.is_done()
    }

    fn __repr__(&self) -> String {
        "MultipartParser()".to_string()
    }
}
