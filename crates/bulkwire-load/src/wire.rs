//! The load loop's HTTP/1.1 client connection (RFC 9112): one request at a
//! time on a keep-alive TCP connection. The request head and the body's
//! shared segments go out together in one `writev`; the answer's head is
//! parsed in the read buffer and its body is counted and dropped.
//!
//! Why not hyper's client here: its split into a request sender and a
//! connection task (a channel send, a oneshot answer, a `HeaderMap` and
//! frame-by-frame body polling per request) cost the load loop more user
//! CPU than everything else it does; a load generator needs only the status,
//! the body's length and whether the connection can be reused. The
//! syscalls are the same as hyper's: one `writev` per request (more only
//! when the socket buffer fills) and reads only when epoll says readable.
//! The answer head and chunk sizes are parsed by `httparse`, hyper's own
//! parser; this module adds only the I/O loop and the framing rules of
//! RFC 9112 §6.3.
//!
//! An answer whose type is XML (or MTOM) may be a fault with status 200:
//! the first [`crate::fault::PEEK_BYTES`] of its body are kept as they
//! stream by and looked at once it is read ([`crate::fault`]). Other
//! answers are only counted, as before.

use crate::fault::{worth_a_look, Fault, Peek};
use bytes::Bytes;
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::ops::Range;
use std::pin::Pin;
use std::task::Poll;
use tokio::io::{AsyncReadExt, AsyncWrite};
use tokio::net::TcpStream;

/// Longest answer head (status line and fields), and longest chunk-size or
/// trailer line, accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Initial read buffer; it grows only for a head longer than this.
const READ_BUF: usize = 8 * 1024;
/// iovecs per `writev` call (as hyper).
const MAX_IOVS: usize = 64;
/// Most header fields in an answer head.
const MAX_FIELDS: usize = 64;

/// One open connection.
pub(crate) struct Wire {
    tcp: TcpStream,
    /// Read buffer; `buf[start..end]` is read but not yet consumed.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The beginning of the current answer's body, when its type says it
    /// may be a fault.
    peek: Peek,
}

/// What the load loop keeps of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answer {
    pub status: u16,
    /// Body bytes (decoded from chunked framing, if any).
    pub body_bytes: u64,
    /// Keep-alive: the next request may use this connection.
    pub reusable: bool,
    /// The body was an XML-RPC or SOAP fault.
    pub fault: Option<Fault>,
}

/// How sending a request ended.
enum Sent {
    All,
    /// The server answered before the body was all sent.
    Answered(Head),
}

/// How the answer's body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

/// A parsed answer head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Head {
    status: u16,
    framing: Framing,
    keep_alive: bool,
    /// What to look into the body for (see [`Look`]).
    look: Look,
}

/// Whether an answer's body is looked into for a fault, from its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Look {
    #[default]
    No,
    Xml,
    /// `multipart/related`: the envelope is in the root part.
    Multipart,
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

fn eof() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed mid-answer")
}

impl Wire {
    /// Wraps a connected socket.
    pub(crate) fn new(tcp: TcpStream) -> Wire {
        Wire {
            tcp,
            buf: vec![0; READ_BUF],
            start: 0,
            end: 0,
            peek: Peek::default(),
        }
    }

    /// Sends `head` then `body` and reads the whole answer.
    pub(crate) async fn exchange(&mut self, head: &[u8], body: &[Bytes]) -> io::Result<Answer> {
        if let Sent::Answered(h) = self.send(head, body).await? {
            // The server answered before taking the whole body (a 413 on
            // Content-Length, a 401): the answer counts; the connection,
            // with part of a body unsent, cannot carry another request.
            let body_bytes = self.read_body(&h).await.unwrap_or(0);
            return Ok(Answer {
                status: h.status,
                body_bytes,
                reusable: false,
                fault: self.fault(&h),
            });
        }
        loop {
            let h = self.read_head().await?;
            // Interim answers (100 Continue, 103 Early Hints): the final one follows.
            if (100..200).contains(&h.status) && h.status != 101 {
                continue;
            }
            let body_bytes = self.read_body(&h).await?;
            let reusable = h.keep_alive && h.framing != Framing::UntilClose && h.status != 101;
            return Ok(Answer {
                status: h.status,
                body_bytes,
                reusable,
                fault: self.fault(&h),
            });
        }
    }

    /// Whether an idle connection can take a request: false if the server
    /// closed it or sent something unasked. A quiet socket costs no syscall
    /// (tokio knows it saw no readiness since the last short read).
    pub(crate) async fn idle_ok(&mut self) -> bool {
        if self.start != self.end {
            return false;
        }
        let quiet = poll_fn(|cx| Poll::Ready(self.tcp.poll_read_ready(cx).is_pending())).await;
        if quiet {
            return true;
        }
        let mut probe = [0u8; 1];
        matches!(self.tcp.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// Writes all of `head` and `body`, vectored, resuming after short
    /// writes. While the socket takes no more, it also watches for an
    /// answer that comes before the body is all sent (as hyper does): a
    /// server may refuse a body it will not read, then close.
    async fn send(&mut self, head: &[u8], body: &[Bytes]) -> io::Result<Sent> {
        let mut at = Cursor::default();
        let part = |i: usize| if i == 0 { head } else { &body[i - 1][..] };
        let parts = body.len() + 1;
        while at.part < parts {
            // The iovecs live on the stack of one poll, not in this future:
            // futures are moved (copied) as they are composed, per request.
            let tcp = &mut self.tcp;
            let step = poll_fn(|cx| {
                let mut iovs = [IoSlice::new(&[]); MAX_IOVS];
                let mut n = 0;
                for i in at.part..parts.min(at.part + MAX_IOVS) {
                    let skip = if i == at.part { at.offset } else { 0 };
                    iovs[n] = IoSlice::new(&part(i)[skip..]);
                    n += 1;
                }
                match Pin::new(&mut *tcp).poll_write_vectored(cx, &iovs[..n]) {
                    Poll::Ready(r) => Poll::Ready(r.map(Some)),
                    Poll::Pending => tcp.poll_read_ready(cx).map_ok(|()| None),
                }
            })
            .await;
            match step {
                Ok(Some(0)) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(Some(n)) => at = at.advance(n, |i| part(i).len(), parts),
                // Readable while sending: an early answer, or not yet all of one.
                Ok(None) => {
                    if let Some(h) = self.early_head()? {
                        return Ok(Sent::Answered(h));
                    }
                }
                // A reset or broken pipe after the server answered and closed.
                Err(e) => match self.early_head() {
                    Ok(Some(h)) => return Ok(Sent::Answered(h)),
                    _ => return Err(e),
                },
            }
        }
        Ok(Sent::All)
    }

    /// Reads what has arrived, without waiting, and parses a final answer's
    /// head from it if it is all there (an interim 1xx is skipped).
    fn early_head(&mut self) -> io::Result<Option<Head>> {
        loop {
            self.make_room()?;
            match self.tcp.try_read(&mut self.buf[self.end..]) {
                Ok(0) => break,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        while let Some((h, used)) = parse_head(&self.buf[self.start..self.end])? {
            self.start += used;
            if !(100..200).contains(&h.status) {
                return Ok(Some(h));
            }
        }
        Ok(None)
    }

    /// Reads until a whole head is buffered, parses and consumes it.
    async fn read_head(&mut self) -> io::Result<Head> {
        loop {
            if let Some((head, used)) = parse_head(&self.buf[self.start..self.end])? {
                self.start += used;
                return Ok(head);
            }
            if self.end - self.start >= MAX_HEAD {
                return Err(invalid("answer head over 64 KiB"));
            }
            if self.fill().await? == 0 {
                return Err(eof());
            }
        }
    }

    /// Consumes the body; returns its (decoded) length. Keeps its
    /// beginning in `peek` when the head says to look into it.
    async fn read_body(&mut self, h: &Head) -> io::Result<u64> {
        let look = h.look != Look::No;
        if look {
            self.peek.start(h.look == Look::Multipart);
        }
        match h.framing {
            Framing::Empty => Ok(0),
            Framing::Length(n) => self.skip(n, look).await,
            Framing::Chunked => self.chunked(look).await,
            Framing::UntilClose => self.until_close(look).await,
        }
    }

    /// The fault in the body just read, if it was looked into.
    fn fault(&self, h: &Head) -> Option<Fault> {
        match h.look {
            Look::No => None,
            Look::Xml | Look::Multipart => self.peek.fault(),
        }
    }

    /// Consumes exactly `n` bytes (keeping them in `peek` if `look`).
    async fn skip(&mut self, n: u64, look: bool) -> io::Result<u64> {
        let mut left = n;
        loop {
            let have = ((self.end - self.start) as u64).min(left);
            if look {
                self.peek
                    .feed(&self.buf[self.start..self.start + have as usize]);
            }
            self.start += have as usize;
            left -= have;
            if left == 0 {
                return Ok(n);
            }
            if self.fill().await? == 0 {
                return Err(eof());
            }
        }
    }

    /// A chunked body (RFC 9112 §7.1): sizes, data, then trailer fields.
    async fn chunked(&mut self, look: bool) -> io::Result<u64> {
        let mut total = 0u64;
        loop {
            let size = self.chunk_size().await?;
            if size == 0 {
                break;
            }
            total += self.skip(size, look).await?;
            if !self.line().await?.is_empty() {
                return Err(invalid("chunk data longer than its size"));
            }
        }
        while !self.line().await?.is_empty() {}
        Ok(total)
    }

    /// Consumes a chunk-size line (extensions ignored); returns the size.
    async fn chunk_size(&mut self) -> io::Result<u64> {
        loop {
            let have = &self.buf[self.start..self.end];
            match httparse::parse_chunk_size(have) {
                Ok(httparse::Status::Complete((used, size))) => {
                    self.start += used;
                    return Ok(size);
                }
                Ok(httparse::Status::Partial) if have.len() >= MAX_HEAD => {
                    return Err(invalid("chunk-size line over 64 KiB"));
                }
                Ok(httparse::Status::Partial) => {
                    if self.fill().await? == 0 {
                        return Err(eof());
                    }
                }
                Err(_) => return Err(invalid("bad chunk size")),
            }
        }
    }

    /// A body delimited by the end of the connection.
    async fn until_close(&mut self, look: bool) -> io::Result<u64> {
        let mut total = 0;
        loop {
            total += (self.end - self.start) as u64;
            if look {
                self.peek.feed(&self.buf[self.start..self.end]);
            }
            self.start = self.end;
            if self.fill().await? == 0 {
                return Ok(total);
            }
        }
    }

    /// Consumes one line (CRLF or bare LF: the end of a chunk's data, or a
    /// trailer field); returns where its text lies in `buf`, valid until the
    /// next read.
    async fn line(&mut self) -> io::Result<Range<usize>> {
        loop {
            let have = &self.buf[self.start..self.end];
            if let Some(i) = memchr::memchr(b'\n', have) {
                let cr = usize::from(i > 0 && have[i - 1] == b'\r');
                let text = self.start..self.start + i - cr;
                self.start += i + 1;
                return Ok(text);
            }
            if have.len() >= MAX_HEAD {
                return Err(invalid("chunk line over 64 KiB"));
            }
            if self.fill().await? == 0 {
                return Err(eof());
            }
        }
    }

    /// Reads more bytes after the unconsumed ones; 0 at end of stream.
    async fn fill(&mut self) -> io::Result<usize> {
        self.make_room()?;
        let n = self.tcp.read(&mut self.buf[self.end..]).await?;
        self.end += n;
        Ok(n)
    }

    /// Room after the unconsumed bytes: an empty buffer starts over, else
    /// they move to the front, or the buffer doubles when it is full of
    /// them, up to `MAX_HEAD` of them (the most any head or line may take).
    fn make_room(&mut self) -> io::Result<()> {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
        } else if self.end == self.buf.len() {
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                (self.start, self.end) = (0, self.end - self.start);
            } else if self.buf.len() < MAX_HEAD {
                self.buf.resize(self.buf.len() * 2, 0);
            } else {
                return Err(invalid("answer head over 64 KiB"));
            }
        }
        Ok(())
    }
}

/// Where `send` is: part 0 is the head, part `i` body segment `i - 1`.
#[derive(Debug, Default, Clone, Copy)]
struct Cursor {
    part: usize,
    offset: usize,
}

impl Cursor {
    /// Past `written` more bytes: whole parts, then into the partly written one.
    fn advance(mut self, mut written: usize, len: impl Fn(usize) -> usize, parts: usize) -> Cursor {
        while self.part < parts && written >= len(self.part) - self.offset {
            written -= len(self.part) - self.offset;
            self = Cursor {
                part: self.part + 1,
                offset: 0,
            };
        }
        self.offset += written;
        self
    }
}

/// Parses an answer head at the start of `buf`, if it is all there:
/// the head and its length including the blank line.
fn parse_head(buf: &[u8]) -> io::Result<Option<(Head, usize)>> {
    let mut storage = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut answer = httparse::Response::new(&mut storage);
    let used = match answer.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(invalid(&format!("malformed answer head: {e}"))),
    };
    let mut fields = Fields {
        // HTTP/1.1 keeps the connection unless told otherwise; 1.0 closes it.
        keep_alive: answer.version == Some(1),
        ..Fields::default()
    };
    for f in answer.headers.iter() {
        fields.add(f.name, f.value)?;
    }
    if answer.version == Some(0) && fields.chunked.is_some() {
        // Transfer-Encoding in HTTP/1.0 is faulty framing: close after
        // (RFC 9112 §6.1).
        fields.keep_alive = false;
    }
    let status = answer.code.ok_or_else(|| invalid("no status"))?;
    Ok(Some((fields.head(status), used)))
}

/// The header fields that matter for framing and reuse.
#[derive(Debug, Default)]
struct Fields {
    length: Option<u64>,
    /// `Some(whether the final coding is chunked)` if Transfer-Encoding came.
    chunked: Option<bool>,
    keep_alive: bool,
    look: Look,
}

impl Fields {
    /// The head these fields give an answer with `status`.
    fn head(&self, status: u16) -> Head {
        let framing = if (100..200).contains(&status) || status == 204 || status == 304 {
            Framing::Empty
        } else if let Some(chunked) = self.chunked {
            // A final coding other than chunked means the body runs to the end.
            if chunked {
                Framing::Chunked
            } else {
                Framing::UntilClose
            }
        } else {
            self.length.map_or(Framing::UntilClose, Framing::Length)
        };
        Head {
            status,
            framing,
            keep_alive: self.keep_alive,
            look: self.look,
        }
    }

    fn add(&mut self, name: &str, value: &[u8]) -> io::Result<()> {
        let value = value.trim_ascii();
        if name.eq_ignore_ascii_case("content-length") {
            let n = decimal(value).ok_or_else(|| invalid("bad Content-Length"))?;
            if self.length.is_some_and(|m| m != n) {
                return Err(invalid("conflicting Content-Length"));
            }
            self.length = Some(n);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            let last = value.rsplit(|&b| b == b',').next().unwrap_or_default();
            self.chunked = Some(last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case("content-type") {
            self.look = if !worth_a_look(value) {
                Look::No
            } else if value.len() >= 9 && value[..9].eq_ignore_ascii_case(b"multipart") {
                Look::Multipart
            } else {
                Look::Xml
            };
        } else if name.eq_ignore_ascii_case("connection") {
            for token in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                if token.eq_ignore_ascii_case(b"close") {
                    self.keep_alive = false;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    self.keep_alive = true;
                }
            }
        }
        Ok(())
    }
}

/// A non-empty run of ASCII digits that fits a `u64`.
fn decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// Appends `n` in decimal (no formatting machinery on the request path).
pub(crate) fn push_decimal(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    fn head(text: &str) -> Head {
        parse_head(text.as_bytes()).unwrap().unwrap().0
    }

    #[test]
    fn heads_give_status_framing_and_reuse() {
        let h = head("HTTP/1.1 201 Created\r\nContent-Length: 12\r\n\r\n");
        assert_eq!(
            (h.status, h.framing, h.keep_alive),
            (201, Framing::Length(12), true)
        );
        let h = head(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, Chunked\r\ncontent-length: 5\r\n\r\n",
        );
        assert_eq!(h.framing, Framing::Chunked);
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n");
        assert_eq!(h.framing, Framing::UntilClose);
        let h = head("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert!(!h.keep_alive);
        let h = head("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n");
        assert!(h.keep_alive);
        let h =
            head("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert!(!h.keep_alive);
        let h = head("HTTP/1.1 503 Busy\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
        assert_eq!((h.status, h.keep_alive), (503, false));
        let h = head("HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n");
        assert_eq!(h.framing, Framing::Empty);
        let h = head("HTTP/1.1 200\r\nx: y\r\n\r\n");
        assert_eq!((h.status, h.framing), (200, Framing::UntilClose));
    }

    #[test]
    fn incomplete_and_malformed_heads() {
        let text = b"HTTP/1.1 200 OK\nContent-Length: 2\r\n\nhi";
        let (h, used) = parse_head(text).unwrap().unwrap();
        assert_eq!((h.framing, &text[used..]), (Framing::Length(2), &b"hi"[..]));
        assert!(parse_head(b"HTTP/1.1 200 OK\r\n").unwrap().is_none());
        assert!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Len")
            .unwrap()
            .is_none());
        for bad in [
            "HTTP/2 200 OK\r\n\r\n",
            "HTTP/1.1 20x OK\r\n\r\n",
            "HTTP/1.1 2000 OK\r\n\r\n",
            "HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        ] {
            assert!(parse_head(bad.as_bytes()).is_err(), "{bad:?}");
        }
        let mut v = Vec::new();
        for n in [0, 7, 140_123, u64::MAX] {
            v.clear();
            push_decimal(&mut v, n);
            assert_eq!(v, n.to_string().as_bytes());
        }
    }

    /// A server that reads one request (head and `len` body bytes) and
    /// writes each of `answers` in pieces, then keeps or closes the socket.
    async fn serve_once(answers: Vec<&'static [u8]>, close: bool) -> std::net::SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            for answer in answers {
                let mut got = Vec::new();
                while !got.ends_with(b"BODY") {
                    let mut b = [0u8; 4096];
                    let n = s.read(&mut b).await.unwrap();
                    got.extend_from_slice(&b[..n]);
                }
                for piece in answer.chunks(3) {
                    s.write_all(piece).await.unwrap();
                    s.flush().await.unwrap();
                    tokio::task::yield_now().await;
                }
            }
            if !close {
                tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            }
        });
        addr
    }

    async fn client(addr: std::net::SocketAddr) -> Wire {
        Wire::new(TcpStream::connect(addr).await.unwrap())
    }

    #[tokio::test]
    async fn answers_of_every_framing_split_in_pieces() {
        let answers: Vec<&[u8]> = vec![
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: 1\r\n\r\n",
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 200 OK\r\n\r\nto the end",
        ];
        let mut w = client(serve_once(answers, true).await).await;
        let body = [Bytes::from_static(b"xy"), Bytes::from_static(b"BODY")];
        let mut got = Vec::new();
        for _ in 0..4 {
            assert!(w.idle_ok().await);
            got.push(w.exchange(b"POST / HTTP/1.1\r\n\r\n", &body).await.unwrap());
        }
        let short: Vec<_> = got
            .iter()
            .map(|a| (a.status, a.body_bytes, a.reusable))
            .collect();
        assert_eq!(
            short,
            [
                (201, 5, true),
                (200, 19, true),
                (404, 0, true),
                (200, 10, false)
            ]
        );
    }

    #[tokio::test]
    async fn xml_answers_are_looked_into_for_faults() {
        let rpc = "<methodResponse><fault><value><struct><member><name>faultCode</name>\
                   <value><int>403</int></value></member></struct></value></fault></methodResponse>";
        let soap = "<e:Envelope xmlns:e=\"u\"><e:Body><e:Fault><e:Code><e:Value>e:Receiver\
                    </e:Value></e:Code></e:Fault></e:Body></e:Envelope>";
        let (soap1, soap2) = soap.split_at(40);
        let leak = |s: String| -> &'static [u8] { Box::leak(s.into_bytes().into_boxed_slice()) };
        let answers: Vec<&[u8]> = vec![
            leak(format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: {}\r\n\r\n{rpc}",
                rpc.len()
            )),
            leak(format!(
                "HTTP/1.1 500 Error\r\nContent-Type: application/soap+xml\r\n\
                 Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{soap1}\r\n{:x}\r\n{soap2}\r\n0\r\n\r\n",
                soap1.len(),
                soap2.len()
            )),
            // Not XML: the same bytes are only counted.
            leak(format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{rpc}",
                rpc.len()
            )),
            // Until the connection closes.
            b"HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\n\r\n<methodResponse><params/></methodResponse>",
        ];
        let mut w = client(serve_once(answers, true).await).await;
        let body = [Bytes::from_static(b"BODY")];
        let mut got = Vec::new();
        for _ in 0..4 {
            let a = w.exchange(b"POST / HTTP/1.1\r\n\r\n", &body).await.unwrap();
            got.push((a.status, a.fault.map(|f| f.to_string())));
        }
        let want = [
            (200, Some("xmlrpc:403".to_string())),
            (500, Some("soap:Receiver".to_string())),
            (200, None),
            (200, None),
        ];
        assert_eq!(got, want);
    }

    #[tokio::test]
    async fn a_closed_connection_is_an_error_and_not_idle_ok() {
        let answers: Vec<&[u8]> = vec![b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort"];
        let mut w = client(serve_once(answers, true).await).await;
        let body = [Bytes::from_static(b"BODY")];
        let e = w
            .exchange(b"POST / HTTP/1.1\r\n\r\n", &body)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);

        let answers: Vec<&[u8]> = vec![b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"];
        let mut w = client(serve_once(answers, true).await).await;
        let a = w.exchange(b"POST / HTTP/1.1\r\n\r\n", &body).await.unwrap();
        assert!(a.reusable);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!w.idle_ok().await, "the server closed it while idle");
    }

    #[tokio::test]
    async fn a_bad_chunk_size_is_invalid_data() {
        let answers: Vec<&[u8]> =
            vec![b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n"];
        let mut w = client(serve_once(answers, true).await).await;
        let body = [Bytes::from_static(b"BODY")];
        let e = w
            .exchange(b"POST / HTTP/1.1\r\n\r\n", &body)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    }

    #[tokio::test]
    async fn an_answer_before_the_body_is_sent_counts() {
        // The server refuses the body after its head, reads a little of it
        // and closes, as a server does with a 413 on Content-Length.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut got = Vec::new();
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                let mut b = [0u8; 4096];
                let n = s.read(&mut b).await.unwrap();
                got.extend_from_slice(&b[..n]);
            }
            s.write_all(
                b"HTTP/1.1 413 Too Large\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbig!",
            )
            .await
            .unwrap();
            let mut drained = 0;
            let mut b = vec![0u8; 64 * 1024];
            while drained < (1 << 20) {
                match s.read(&mut b).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => drained += n,
                }
            }
        });
        let mut w = client(addr).await;
        let body: Vec<Bytes> = (0..64).map(|_| Bytes::from(vec![7u8; 1 << 20])).collect();
        let a = w
            .exchange(
                b"POST / HTTP/1.1\r\nContent-Length: 67108864\r\n\r\n",
                &body,
            )
            .await
            .unwrap();
        assert_eq!((a.status, a.body_bytes, a.reusable), (413, 4, false));
    }

    #[tokio::test]
    async fn long_bodies_are_written_whole() {
        // More parts than one writev takes, and more bytes than a socket buffer.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let parts: Vec<Bytes> = (0..200u32)
            .map(|i| Bytes::from(vec![i as u8; 40_000 + i as usize]))
            .collect();
        let want: Vec<u8> = parts.iter().flat_map(|p| p.iter().copied()).collect();
        let n = want.len();
        let reader = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut got = vec![0u8; 4 + n];
            s.read_exact(&mut got).await.unwrap();
            s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .await
                .unwrap();
            got
        });
        let mut w = client(addr).await;
        let a = w.exchange(b"HEAD", &parts).await.unwrap();
        assert_eq!(a.status, 200);
        let got = reader.await.unwrap();
        assert_eq!(&got[..4], b"HEAD");
        assert!(got[4..] == want[..]);
    }
}
