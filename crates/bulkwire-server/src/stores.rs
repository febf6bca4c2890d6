//! Opening the stores a configuration names (`--meta`, `--blobs`), so that
//! the rest of the server only ever sees the `BlobStore`/`MetaStore` traits
//! and any mix works (PostgreSQL with files on a shared disk, SQLite with
//! S3, …).
//!
//! - metadata: absent → SQLite at `DATA/meta.sqlite` (the embedded
//!   default); `sqlite:PATH`; `postgres://USER[:PASSWORD]@HOST:PORT/DB`
//!   (also `postgresql://`).
//! - blobs: absent → files under `DATA` (the embedded default); `file:DIR`;
//!   `s3://BUCKET/PREFIX`, with endpoint, region and credentials from the
//!   `[s3]` keys, else the AWS credential chain; `az://CONTAINER/PREFIX`
//!   (Azure Blob Storage, `AZURE_*` variables); `gs://BUCKET/PREFIX`
//!   (Google Cloud Storage, `GOOGLE_*` variables). `[s3] part_size` is
//!   every object store's part size.

use crate::config::Config;
use crate::store::{BlobStore, FsBlobStore, MetaStore, SqliteMeta};
use crate::META_FILE;
use std::path::PathBuf;
use std::sync::Arc;

/// What `--meta` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetaUrl {
    Sqlite(PathBuf),
    Postgres(String),
}

/// What `--blobs` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlobUrl {
    Files(PathBuf),
    S3(String),
    Azure(String),
    Gcs(String),
}

impl MetaUrl {
    pub fn parse(config: &Config) -> Result<MetaUrl, String> {
        match config.meta.as_deref().map(str::trim) {
            None | Some("") => Ok(MetaUrl::Sqlite(config.data.join(META_FILE))),
            Some(u) if u.starts_with("postgres://") || u.starts_with("postgresql://") => {
                Ok(MetaUrl::Postgres(u.to_string()))
            }
            Some(u) => match u.strip_prefix("sqlite:") {
                Some(p) => Ok(MetaUrl::Sqlite(PathBuf::from(p.trim_start_matches("//")))),
                None => Err(format!(
                    "meta {u:?}: expected postgres://USER@HOST:PORT/DB or sqlite:PATH"
                )),
            },
        }
    }
}

impl BlobUrl {
    pub fn parse(config: &Config) -> Result<BlobUrl, String> {
        match config.blobs.as_deref().map(str::trim) {
            None | Some("") => Ok(BlobUrl::Files(config.data.clone())),
            Some(u) if u.starts_with("s3://") => Ok(BlobUrl::S3(u.to_string())),
            Some(u) if u.starts_with("az://") => Ok(BlobUrl::Azure(u.to_string())),
            Some(u) if u.starts_with("gs://") => Ok(BlobUrl::Gcs(u.to_string())),
            Some(u) => match u.strip_prefix("file:") {
                Some(p) => Ok(BlobUrl::Files(PathBuf::from(p.trim_start_matches("//")))),
                None => Err(format!(
                    "blobs {u:?}: expected s3://BUCKET/PREFIX, az://CONTAINER/PREFIX, \
                     gs://BUCKET/PREFIX or file:DIR"
                )),
            },
        }
    }
}

/// Opens the metadata store (running its migrations); the error is one
/// line naming the store and why.
pub async fn open_meta(config: &Config) -> Result<Arc<dyn MetaStore>, String> {
    let l = &config.limits;
    match MetaUrl::parse(config)? {
        MetaUrl::Sqlite(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            }
            let m = SqliteMeta::open(&path).map_err(|e| format!("metadata store: {e}"))?;
            Ok(Arc::new(m))
        }
        MetaUrl::Postgres(url) => postgres(&url, l.meta_connections, l.store_timeout_ms).await,
    }
}

#[cfg(feature = "postgres")]
async fn postgres(url: &str, pool: usize, timeout_ms: u64) -> Result<Arc<dyn MetaStore>, String> {
    let timeout = std::time::Duration::from_millis(timeout_ms);
    let m = crate::store::PgMeta::connect(url, pool, timeout).await;
    Ok(Arc::new(
        m.map_err(|e| format!("metadata store: {}", e.message))?,
    ))
}

#[cfg(not(feature = "postgres"))]
async fn postgres(_: &str, _: usize, _: u64) -> Result<Arc<dyn MetaStore>, String> {
    Err("this build has no PostgreSQL support (feature `postgres`)".into())
}

/// Opens the blob store; the error is one line naming the store and why.
pub fn open_blobs(config: &Config) -> Result<Arc<dyn BlobStore>, String> {
    match BlobUrl::parse(config)? {
        BlobUrl::Files(dir) => {
            std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let b = FsBlobStore::open(&dir).map_err(|e| format!("blob store: {e}"))?;
            Ok(Arc::new(b))
        }
        BlobUrl::S3(url) => s3(&url, config),
        BlobUrl::Azure(url) => azure(&url, config),
        BlobUrl::Gcs(url) => gcs(&url, config),
    }
}

#[cfg(feature = "s3")]
fn azure(url: &str, config: &Config) -> Result<Arc<dyn BlobStore>, String> {
    let mut c = crate::store::AzureConfig::from_url(url).map_err(|e| e.to_string())?;
    c.connect_timeout = std::time::Duration::from_millis(config.limits.store_timeout_ms);
    if let Some(p) = config.s3.part_size {
        c.part_size = usize::try_from(p).unwrap_or(usize::MAX);
    }
    let c = c.with_vars(std::env::vars());
    let b = crate::store::ObjectBlobStore::azure(c).map_err(|e| format!("blob store: {e}"))?;
    Ok(Arc::new(b))
}

#[cfg(feature = "s3")]
fn gcs(url: &str, config: &Config) -> Result<Arc<dyn BlobStore>, String> {
    let mut c = crate::store::GcsConfig::from_url(url).map_err(|e| e.to_string())?;
    c.connect_timeout = std::time::Duration::from_millis(config.limits.store_timeout_ms);
    if let Some(p) = config.s3.part_size {
        c.part_size = usize::try_from(p).unwrap_or(usize::MAX);
    }
    let c = c.with_vars(std::env::vars());
    let b = crate::store::ObjectBlobStore::gcs(c).map_err(|e| format!("blob store: {e}"))?;
    Ok(Arc::new(b))
}

#[cfg(not(feature = "s3"))]
fn azure(_: &str, _: &Config) -> Result<Arc<dyn BlobStore>, String> {
    Err("this build has no object store support (feature `s3`)".into())
}

#[cfg(not(feature = "s3"))]
fn gcs(_: &str, _: &Config) -> Result<Arc<dyn BlobStore>, String> {
    Err("this build has no object store support (feature `s3`)".into())
}

#[cfg(feature = "s3")]
fn s3(url: &str, config: &Config) -> Result<Arc<dyn BlobStore>, String> {
    let mut c = crate::store::S3Config::from_url(url).map_err(|e| e.to_string())?;
    // A store that does not answer fails uploads (503) in the time the
    // configuration gives, as PostgreSQL's pool does.
    c.connect_timeout = std::time::Duration::from_millis(config.limits.store_timeout_ms);
    let c = config.s3.apply(c);
    let b = crate::store::S3BlobStore::new(c.with_env()).map_err(|e| format!("blob store: {e}"))?;
    Ok(Arc::new(b))
}

#[cfg(not(feature = "s3"))]
fn s3(_: &str, _: &Config) -> Result<Arc<dyn BlobStore>, String> {
    Err("this build has no S3 support (feature `s3`)".into())
}

/// Where the metadata store is: `SQLite /abs/path/meta.sqlite` or the
/// PostgreSQL URL without its password.
pub fn meta_summary(config: &Config) -> String {
    match MetaUrl::parse(config) {
        Ok(MetaUrl::Sqlite(p)) => {
            let p = std::path::absolute(&p).unwrap_or(p);
            format!("SQLite {}", p.display())
        }
        Ok(MetaUrl::Postgres(u)) => redact(&u),
        Err(e) => e,
    }
}

/// Where the stores are, for the start-up line (a PostgreSQL password is
/// never shown).
pub fn summary(config: &Config) -> String {
    let meta = meta_summary(config);
    let blobs = match BlobUrl::parse(config) {
        Ok(BlobUrl::Files(d)) => format!("files under {}", d.display()),
        Ok(BlobUrl::S3(u) | BlobUrl::Azure(u) | BlobUrl::Gcs(u)) => u,
        Err(e) => e,
    };
    format!("metadata: {meta}; blobs: {blobs}")
}

/// A URL without the password of its user-info.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    match rest.split_once('@') {
        Some((user, host)) => {
            let user = user.split(':').next().unwrap_or("");
            format!("{scheme}://{user}@{host}")
        }
        None => url.to_string(),
    }
}

/// Both stores, each of which must answer: a server that cannot reach one
/// at start says which and why, in one line, and does not start.
pub async fn open(config: &Config) -> Result<(Arc<dyn BlobStore>, Arc<dyn MetaStore>), String> {
    let blobs = open_blobs(config)?;
    // S3 clients connect lazily: ask once, as `/readyz` does.
    blobs
        .ready()
        .await
        .map_err(|e| format!("blob store: {e}"))?;
    let meta = open_meta(config).await?;
    Ok((blobs, meta))
}

/// `bulkwire serve --check`: what each store says about itself, and
/// whether it answers (a blob store writes, reads and removes a probe).
pub async fn check(config: &Config) -> Vec<(&'static str, Result<String, String>)> {
    let meta = match open_meta(config).await {
        Ok(m) => m.describe().await.map_err(|e| e.to_string()),
        Err(e) => Err(e),
    };
    let blobs = match open_blobs(config) {
        Ok(b) => b.describe().await.map_err(|e| format!("blob store: {e}")),
        Err(e) => Err(e),
    };
    vec![("metadata", meta), ("blobs", blobs)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(meta: Option<&str>, blobs: Option<&str>) -> Config {
        Config {
            meta: meta.map(Into::into),
            blobs: blobs.map(Into::into),
            data: "/d".into(),
            ..Config::default()
        }
    }

    #[test]
    fn urls() {
        let c = with(None, None);
        assert_eq!(
            MetaUrl::parse(&c),
            Ok(MetaUrl::Sqlite("/d/meta.sqlite".into()))
        );
        assert_eq!(BlobUrl::parse(&c), Ok(BlobUrl::Files("/d".into())));
        let c = with(Some("postgres://u@h:5432/db"), Some("s3://b/p"));
        assert!(matches!(MetaUrl::parse(&c), Ok(MetaUrl::Postgres(_))));
        assert!(matches!(BlobUrl::parse(&c), Ok(BlobUrl::S3(_))));
        let c = with(Some("sqlite:/x/m.db"), Some("file:/shared"));
        assert_eq!(MetaUrl::parse(&c), Ok(MetaUrl::Sqlite("/x/m.db".into())));
        assert_eq!(BlobUrl::parse(&c), Ok(BlobUrl::Files("/shared".into())));
        assert!(MetaUrl::parse(&with(Some("mysql://x"), None)).is_err());
        assert!(matches!(
            BlobUrl::parse(&with(None, Some("gs://b/p"))),
            Ok(BlobUrl::Gcs(_))
        ));
        assert!(matches!(
            BlobUrl::parse(&with(None, Some("az://c/p"))),
            Ok(BlobUrl::Azure(_))
        ));
        assert!(BlobUrl::parse(&with(None, Some("hdfs://b"))).is_err());
    }

    #[test]
    fn the_summary_never_shows_a_password() {
        let c = with(Some("postgres://u:hunter2@h:5432/db"), Some("s3://b/p"));
        let s = summary(&c);
        assert!(!s.contains("hunter2"), "{s}");
        assert!(
            s.contains("postgres://u@h:5432/db") && s.contains("s3://b/p"),
            "{s}"
        );
    }
}
