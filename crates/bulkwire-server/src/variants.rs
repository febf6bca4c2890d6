//! Image variants on demand (DESIGN.md "Sending bytes"):
//! `GET /v1/media/{id}/variant?w=W&h=H&fit=cover|contain&format=webp|jpeg|png`,
//! with credentials (the item's ownership rules) or signed as a link of
//! its own (`crate::links`).
//!
//! A variant is made on its first request and stored beside its item
//! (`BlobStore::variant_put`, first one wins), so every node serves it
//! after one made it, and it goes with the item. Sizes are rounded up to
//! the `variant_sizes` ladder, so that few variants exist per item.
//!
//! Making one is bounded like an upload: the item's size against
//! `variant_max_bytes` and its header's pixels against
//! `variant_max_pixels` before any pixel is decoded (413); then a job
//! (`variant_jobs`, waiting in a queue of `variant_queue`) and the plan's
//! memory out of `memory_budget`, both held until the decoder's thread is
//! done; the whole within `variant_timeout` (503 with `Retry-After`
//! otherwise). One node makes each variant once however many ask for it
//! at the same time: the others wait for that one's answer.

use crate::error::{ApiError, Kind};
use crate::response::Response;
use crate::state::AppState;
use crate::store::MediaRecord;
use bulkwire_image::{Error as ImgError, Fit, Format, HeaderScan, Output, Spec};
use bytes::Bytes;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{OnceCell, Semaphore};
use tokio::time::Instant;

/// The variant parameters a URL may carry, besides a link's `exp` and `sig`.
const PARAMS: [&str; 4] = ["w", "h", "fit", "format"];

/// Largest `w` or `h` a request may name (then rounded to the ladder).
const MAX_SIDE: u32 = 65_535;

/// What making variants shares on one node.
pub struct Variants {
    jobs: Arc<Semaphore>,
    queue: Arc<Semaphore>,
    /// Variants being made, by `id/name`: later askers wait for the first.
    making: Mutex<HashMap<String, Arc<Making>>>,
    pool: Pool,
}

impl Variants {
    pub fn new(l: &crate::Limits) -> Variants {
        Variants {
            jobs: Arc::new(Semaphore::new(l.variant_jobs())),
            queue: Arc::new(Semaphore::new(l.variant_queue)),
            making: Mutex::default(),
            pool: Pool::new(l.variant_jobs()),
        }
    }
}

/// One variant being made: its maker's answer, once there.
type Making = OnceCell<Result<(), ApiError>>;

type Job = Box<dyn FnOnce() + Send>;

/// `variant_jobs` threads of their own that decode, resize and encode.
/// Not tokio's blocking pool: its hundreds of threads would each get a
/// malloc arena of its own (glibc makes up to 8 per core), each keeping
/// the freed buffers of the last large image it decoded, so that the
/// process's memory would grow far past what the budget reserves. On these
/// few threads, what the allocator keeps is bounded by `variant_jobs`
/// times the largest job. The threads end when the server's state is
/// dropped (their channel closes).
struct Pool {
    tx: Mutex<std::sync::mpsc::Sender<Job>>,
}

impl Pool {
    fn new(n: usize) -> Pool {
        let (tx, rx) = std::sync::mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..n.max(1) {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("bulkwire-variant-{i}"))
                .spawn(move || loop {
                    let job = rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                    match job {
                        Ok(job) => job(),
                        Err(_) => return,
                    }
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "a variant thread could not start");
            }
        }
        Pool { tx: Mutex::new(tx) }
    }

    /// Runs `f` on one of the pool's threads; its result, or `None` when
    /// it panicked (or the pool is gone).
    async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = tx.send(r.ok());
        });
        let sent = self.tx.lock().unwrap_or_else(|p| p.into_inner()).send(job);
        sent.ok()?;
        rx.await.ok().flatten()
    }
}

/// A variant request's parameters: the spec as asked (what a link signs)
/// and as made (rounded to the ladder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub given: Spec,
    pub spec: Spec,
}

impl Asked {
    /// The query as links sign it: `w=…&h=…&fit=…&format=…`, a missing
    /// side left out.
    pub fn params(&self) -> String {
        params(&self.given)
    }
}

fn params(s: &Spec) -> String {
    let mut p = Vec::new();
    if let Some(w) = s.width {
        p.push(format!("w={w}"));
    }
    if let Some(h) = s.height {
        p.push(format!("h={h}"));
    }
    p.push(format!("fit={}", s.fit.as_str()));
    p.push(format!("format={}", s.output.as_str()));
    p.join("&")
}

/// Parses a variant's query; `exp` and `sig` are a link's, anything else
/// unknown is 400. `fit` is `contain` and `format` `webp` unless given.
pub fn parse(query: &str, ladder: &[u32]) -> Result<Asked, ApiError> {
    let bad = |m: String| ApiError::new(Kind::Malformed, m);
    let mut given = Spec {
        width: None,
        height: None,
        fit: Fit::Contain,
        output: Output::WebP,
    };
    let mut seen: Vec<&str> = Vec::new();
    for kv in query.split('&').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        if k == "exp" || k == "sig" {
            continue;
        }
        if !PARAMS.contains(&k) {
            return Err(bad(format!(
                "unknown variant parameter {k:?}: a variant takes w, h, fit and format"
            )));
        }
        if seen.contains(&k) {
            return Err(bad(format!("variant parameter {k:?} is given twice")));
        }
        seen.push(k);
        match k {
            "w" | "h" => {
                let n = v.parse::<u32>().ok().filter(|n| (1..=MAX_SIDE).contains(n));
                let n = n.ok_or_else(|| {
                    bad(format!(
                        "{k} must be a whole number of pixels from 1 to {MAX_SIDE}, not {v:?}"
                    ))
                })?;
                match k {
                    "w" => given.width = Some(n),
                    _ => given.height = Some(n),
                }
            }
            "fit" => {
                given.fit = Fit::parse(v)
                    .ok_or_else(|| bad(format!("fit must be cover or contain, not {v:?}")))?
            }
            _ => {
                given.output = Output::parse(v)
                    .ok_or_else(|| bad(format!("format must be webp, jpeg or png, not {v:?}")))?
            }
        }
    }
    if given.width.is_none() && given.height.is_none() {
        return Err(bad("a variant needs w or h (or both), in pixels".into()));
    }
    let spec = Spec {
        width: given.width.map(|v| round(v, ladder)),
        height: given.height.map(|v| round(v, ladder)),
        ..given
    };
    Ok(Asked { given, spec })
}

/// The smallest size of the ladder at or above `v`, else its largest.
pub fn round(v: u32, ladder: &[u32]) -> u32 {
    ladder
        .iter()
        .copied()
        .find(|s| *s >= v)
        .or(ladder.last().copied())
        .unwrap_or(v)
}

/// The format of an item a variant can be made of, or why not (415).
fn source_format(m: &MediaRecord) -> Result<Format, ApiError> {
    if let Some(f) = Format::from_media_type(&m.content_type) {
        return Ok(f);
    }
    let ct = m.content_type.split(';').next().unwrap_or("").trim();
    let why = if crate::handlers::media::is_active_type(ct) && ct.starts_with("image/") {
        format!("{ct} is never rasterised here: download it (it is sent as an attachment)")
    } else {
        format!("variants are made of JPEG, PNG, WebP and GIF images; this item is {ct}")
    };
    Err(ApiError::new(Kind::Unsupported, why))
}

/// The item's variant `asked`: made if it was not, then sent as a download
/// is (`ETag`, `Range`, a long `Cache-Control`).
pub(crate) async fn answer(
    state: &Arc<AppState>,
    ask: &crate::handlers::media::Ask<'_>,
    id: &str,
    asked: &Asked,
    owner: Option<&str>,
) -> Result<Response, ApiError> {
    let m = crate::handlers::media::find(state, id, owner).await?;
    source_format(&m)?;
    let name = asked.spec.name();
    let etag = format!("\"{}.{name}\"", m.sha256);
    let out = asked.spec.output;
    let sendable = crate::handlers::media::Sendable {
        etag,
        content_type: out.media_type(),
        disposition: disposition(&m, out),
        cache_control: ask.cache_control(),
        modified: m.created,
    };
    if sendable.unchanged(ask.headers) {
        return Ok(crate::handlers::media::not_modified(&sendable));
    }
    let size = match state.blobs.variant_size(&m.id, &name).await {
        Ok(Some(n)) => n,
        Ok(None) => {
            made(state, &m, asked.spec, &name).await?;
            state
                .blobs
                .variant_size(&m.id, &name)
                .await
                .map_err(crate::upload::storage_error)?
                .ok_or_else(|| ApiError::new(Kind::NotFound, "no such media (deleted meanwhile)"))?
        }
        Err(e) => return Err(crate::upload::storage_error(e)),
    };
    let key = crate::handlers::media::BlobKey::Variant(&m.id, &name);
    let route = crate::downloads::Route::Variant;
    crate::handlers::media::send(state, ask, &sendable, key, size, route).await
}

/// `inline; filename="photo.webp"`: the item's name with the variant's
/// extension.
fn disposition(m: &MediaRecord, out: Output) -> String {
    let stem = m
        .filename
        .as_deref()
        .map(|f| f.rsplit_once('.').map_or(f, |(s, _)| s))
        .unwrap_or("variant");
    let name = format!("{stem}.{}", out.as_str());
    crate::handlers::media::disposition_for("inline", Some(&name))
}

/// Makes variant `name` once on this node however many ask at once.
async fn made(
    state: &Arc<AppState>,
    m: &MediaRecord,
    spec: Spec,
    name: &str,
) -> Result<(), ApiError> {
    let v = &state.variants;
    let key = format!("{}/{name}", m.id);
    let cell = {
        let mut map = v.making.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(key.clone()).or_default().clone()
    };
    let r = cell
        .get_or_init(|| make(state, m, spec, name))
        .await
        .clone();
    let mut map = v.making.lock().unwrap_or_else(|p| p.into_inner());
    if map.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
        map.remove(&key);
    }
    r
}

/// Makes and stores one variant: see the module doc for the bounds.
async fn make(
    state: &Arc<AppState>,
    m: &MediaRecord,
    spec: Spec,
    name: &str,
) -> Result<(), ApiError> {
    let l = &state.config.limits;
    let v = &state.variants;
    let _queued = v
        .queue
        .clone()
        .try_acquire_owned()
        .map_err(|_| ApiError::busy("variant_queue", l.variant_queue as u64))?;
    let deadline = Instant::now() + l.variant_timeout();
    if m.size > l.variant_max_bytes {
        let mut e = ApiError::limit("variant_max_bytes", l.variant_max_bytes);
        e.message = format!(
            "this image is {}, over the limit {} for making variants",
            bulkwire_units::format_size(m.size),
            crate::error::limit_text("variant_max_bytes", l.variant_max_bytes)
        );
        return Err(e);
    }
    let h = header(state, m).await?;
    if h.pixels() > l.variant_max_pixels {
        let mut e = ApiError::limit("variant_max_pixels", l.variant_max_pixels);
        e.message = format!(
            "this image declares {}×{} = {} pixels, over the limit {} for making variants \
             (nothing was decoded)",
            h.width,
            h.height,
            h.pixels(),
            crate::error::limit_text("variant_max_pixels", l.variant_max_pixels)
        );
        return Err(e);
    }
    let plan = bulkwire_image::plan(&h, &spec);
    let need = plan.memory + m.size;
    if need > l.memory_budget {
        let mut e = ApiError::limit("memory_budget", l.memory_budget);
        e.message = format!(
            "making this variant needs {} of memory, over the whole {}",
            bulkwire_units::format_size(need),
            crate::error::limit_text("memory_budget", l.memory_budget)
        );
        return Err(e);
    }
    let timed_out = || {
        let mut e = ApiError::busy("variant_timeout", l.variant_timeout);
        e.message = format!(
            "server busy: the variant was not made within {}, retry later",
            crate::error::limit_text("variant_timeout", l.variant_timeout)
        );
        e
    };
    let job = tokio::time::timeout_at(deadline, v.jobs.clone().acquire_owned())
        .await
        .map_err(|_| timed_out())?
        .map_err(|_| timed_out())?;
    let kib = u32::try_from(need.div_ceil(1024)).unwrap_or(u32::MAX);
    let memory = state
        .memory
        .clone()
        .try_acquire_many_owned(kib)
        .map_err(|_| ApiError::busy("memory_budget", l.memory_budget))?;
    let src = read_all(state, m).await?;
    let std_deadline = deadline.into_std();
    let task = v.pool.run(move || {
        // Held until the decoder's thread is done, even past the deadline.
        let _held = (job, memory);
        bulkwire_image::make(&src, &h, &plan, &spec, std_deadline)
    });
    let bytes = match tokio::time::timeout_at(deadline, task).await {
        Err(_) => return Err(timed_out()),
        Ok(None) => {
            let e = "the image does not decode (its decoder gave up on it)";
            return Err(ApiError::new(Kind::Unprocessable, e));
        }
        Ok(Some(r)) => r.map_err(|e| image_error(e, l, timed_out))?,
    };
    state
        .blobs
        .variant_put(&m.id, name, Bytes::from(bytes))
        .await
        .map_err(crate::upload::storage_error)?;
    state
        .metrics
        .variants_made
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Deleted while this was made: its deletion may have removed the
    // variants before this one was stored.
    if state.meta.get(&m.id, None).await?.is_none() {
        let _ = state.blobs.delete(&m.id).await;
        return Err(ApiError::new(
            Kind::NotFound,
            "no such media (deleted meanwhile)",
        ));
    }
    Ok(())
}

fn image_error(e: ImgError, l: &crate::Limits, timed_out: impl Fn() -> ApiError) -> ApiError {
    match e {
        ImgError::Unsupported(m) => ApiError::new(Kind::Unsupported, m),
        ImgError::Undecodable(m) => ApiError::new(Kind::Unprocessable, m),
        ImgError::Memory(_) => ApiError::limit("memory_budget", l.memory_budget),
        ImgError::TimedOut => timed_out(),
    }
}

/// The item's header, from its first bytes (nothing decoded). An item
/// stored as an image whose bytes are not one is 422.
async fn header(state: &AppState, m: &MediaRecord) -> Result<bulkwire_image::Header, ApiError> {
    let n = m.size.min(bulkwire_image::HEADER_SCAN_MAX);
    let mut scan = HeaderScan::new();
    if n > 0 {
        let mut s = state.blobs.open(&m.id, 0, n).await.map_err(open_error)?;
        while let Some(c) = std::future::poll_fn(|cx| s.as_mut().poll_next(cx)).await {
            if scan.feed(&c.map_err(crate::upload::storage_error)?) {
                break;
            }
        }
    }
    scan.finish().map_err(|e| match e {
        ImgError::Unsupported(msg) if !msg.contains("not decoded here") => ApiError::new(
            Kind::Unprocessable,
            format!(
                "stored as {} but its bytes are not that image: {msg}",
                m.content_type
            ),
        ),
        ImgError::Unsupported(msg) => ApiError::new(Kind::Unsupported, msg),
        e => ApiError::new(Kind::Unprocessable, e.to_string()),
    })
}

fn open_error(e: std::io::Error) -> ApiError {
    if e.kind() == std::io::ErrorKind::NotFound {
        return ApiError::new(Kind::NotFound, "no such media (deleted meanwhile)");
    }
    crate::upload::storage_error(e)
}

/// The whole item, whose size the row says (within `variant_max_bytes`).
async fn read_all(state: &AppState, m: &MediaRecord) -> Result<Vec<u8>, ApiError> {
    let mut v = Vec::with_capacity(usize::try_from(m.size).unwrap_or(0));
    if m.size == 0 {
        return Ok(v);
    }
    let mut s = state
        .blobs
        .open(&m.id, 0, m.size)
        .await
        .map_err(open_error)?;
    while let Some(c) = std::future::poll_fn(|cx| s.as_mut().poll_next(cx)).await {
        v.extend_from_slice(&c.map_err(crate::upload::storage_error)?);
    }
    Ok(v)
}

/// An image's size from the start of its stored bytes (as shown: EXIF
/// orientation applied), for its media row; `None` for anything else or
/// a header that does not read.
pub async fn stored_size(
    blobs: &dyn crate::store::BlobStore,
    id: &str,
    content_type: &str,
    size: u64,
) -> Option<(u32, u32)> {
    Format::from_media_type(content_type)?;
    let n = size.min(bulkwire_image::HEADER_SCAN_MAX);
    let mut scan = HeaderScan::new();
    let mut s = blobs.open(id, 0, n).await.ok()?;
    while let Some(c) = std::future::poll_fn(|cx| s.as_mut().poll_next(cx)).await {
        if scan.feed(&c.ok()?) {
            break;
        }
    }
    scan.finish().ok().map(|h| h.shown())
}

/// The signed link of variant `asked` (its sides rounded to `ladder`) of
/// item `id`.
pub fn link(
    base: &str,
    links: &crate::links::Links,
    id: &str,
    ladder: &[u32],
    asked: Spec,
) -> String {
    let spec = Spec {
        width: asked.width.map(|w| round(w, ladder)),
        height: asked.height.map(|h| round(h, ladder)),
        ..asked
    };
    format!("{base}{}", links.variant_path(id, &params(&spec)))
}

/// A square box of `side` pixels.
pub fn square(side: u32, fit: Fit, output: Output) -> Spec {
    Spec {
        width: Some(side),
        height: Some(side),
        fit,
        output,
    }
}

/// Whether an item's type is one variants are made of.
pub fn has_variants(m: &MediaRecord) -> bool {
    Format::from_media_type(&m.content_type).is_some()
}

/// Size of `spec`'s variant of an image of `shown` pixels (what
/// [`bulkwire_image::plan`] makes of it).
pub fn size_of(shown: (u32, u32), spec: &Spec) -> (u32, u32) {
    let h = bulkwire_image::Header {
        format: Format::Png,
        width: shown.0,
        height: shown.1,
        orientation: 1,
        progressive: false,
        channels: 4,
        depth: 1,
    };
    let p = bulkwire_image::plan(&h, spec);
    (p.width, p.height)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LADDER: [u32; 5] = [150, 300, 768, 1024, 2048];

    #[test]
    fn sizes_round_up_to_the_ladder() {
        let a = parse("w=200&h=10&fit=cover&format=jpeg&sig=x&exp=1", &LADDER).unwrap();
        assert_eq!((a.spec.width, a.spec.height), (Some(300), Some(150)));
        assert_eq!((a.given.width, a.given.height), (Some(200), Some(10)));
        assert_eq!(a.params(), "w=200&h=10&fit=cover&format=jpeg");
        let a = parse("h=5000", &LADDER).unwrap();
        assert_eq!((a.spec.width, a.spec.height), (None, Some(2048)));
        assert_eq!((a.spec.fit, a.spec.output), (Fit::Contain, Output::WebP));
        for (q, says) in [
            ("", "needs w or h"),
            ("fit=cover", "needs w or h"),
            ("w=0", "w must be"),
            ("w=x", "w must be"),
            ("w=70000", "w must be"),
            ("w=1&w=2", "given twice"),
            ("w=1&fit=fill", "fit must be"),
            ("w=1&format=gif", "format must be"),
            ("w=1&q=80", "unknown variant parameter \"q\""),
        ] {
            let e = parse(q, &LADDER).unwrap_err();
            assert!(e.message.contains(says), "{q}: {}", e.message);
            assert_eq!(e.status(), 400);
        }
    }
}
