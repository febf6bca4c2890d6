//! Python bindings for bulkwire's multipart parser (the `bulkwire` package
//! on PyPI, built with maturin; the Python half is in `python/bulkwire`).
//!
//! - [`parser::MultipartParser`]: python-multipart's `MultipartParser` API
//!   (callbacks, `write`, `finalize`) over the sans-IO
//!   [`bulkwire_multipart::Parser`], so that Starlette and FastAPI switch
//!   with one call (`bulkwire.install()`).
//! - `parse_options_header` ([`options`]): RFC 7578 plain parameters in one
//!   pass, no regular expression.
//! - [`feeder::Feeder`]: the engine of the iterator API `bulkwire.parse`.
//!
//! No `unsafe` here: PyO3 wraps the C API, and the parser's events are
//! mapped back onto the caller's buffer by address arithmetic on slices
//! ([`events::Loc::of`]).
#![forbid(unsafe_code)]

pub mod events;
mod feeder;
pub mod options;
mod parser;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

/// `parse_options_header(value) -> (bytes, dict[bytes, bytes])`, as
/// python-multipart's function returns it (see [`options`]). `str` is read
/// as latin-1 (WSGI's convention for header bytes), `None` or empty gives
/// `(b"", {})`.
#[pyfunction]
#[pyo3(signature = (value))]
fn parse_options_header<'py>(
    py: Python<'py>,
    value: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyDict>)> {
    let raw: Vec<u8> = match value {
        None => Vec::new(),
        Some(v) if v.is_instance_of::<PyString>() => {
            let s = v.cast::<PyString>()?.to_cow()?;
            // Characters above U+00FF cannot come from latin-1 header bytes;
            // keep them as UTF-8 rather than fail.
            match s.chars().all(|c| (c as u32) < 256) {
                true => s.chars().map(|c| c as u8).collect(),
                false => s.as_bytes().to_vec(),
            }
        }
        Some(v) => v.extract::<Vec<u8>>()?,
    };
    let (ctype, params) = options::parse(&raw);
    let d = PyDict::new(py);
    for (k, v) in params {
        d.set_item(PyBytes::new(py, &k), PyBytes::new(py, &v))?;
    }
    Ok((PyBytes::new(py, &ctype), d))
}

#[pymodule]
fn _bulkwire(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<parser::MultipartParser>()?;
    m.add_class::<feeder::Feeder>()?;
    m.add_function(wrap_pyfunction!(parse_options_header, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
