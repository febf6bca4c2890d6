//! The `raw` scenario: the same bytes on every request (a file or a string),
//! with the content type given; per-request variation goes into headers.

use super::{Payload, Scenario};
use crate::pattern::Vars;
use bytes::Bytes;

/// A fixed body, shared by every request.
#[derive(Debug, Clone)]
pub struct Raw {
    content_type: String,
    data: Bytes,
}

impl Raw {
    /// `data` is sent as is; `content_type` defaults to
    /// `application/octet-stream`.
    pub fn new(data: Bytes, content_type: Option<&str>) -> Raw {
        Raw {
            content_type: content_type.unwrap_or("application/octet-stream").into(),
            data,
        }
    }
}

impl Scenario for Raw {
    fn name(&self) -> &str {
        "raw"
    }

    fn content_type(&self) -> &str {
        &self.content_type
    }

    fn render(&self, _vars: &Vars) -> std::io::Result<Payload> {
        Ok(Payload {
            segments: vec![self.data.clone()],
            len: self.data.len() as u64,
        })
    }
}
