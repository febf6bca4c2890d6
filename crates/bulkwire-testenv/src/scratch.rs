//! Scratch directories for servers, cleaned up even when their test process was killed.
//!
//! A server shared through a `static` is never dropped, so its `TempDir` never removes itself:
//! a PostgreSQL data directory (~40 MB) or a SeaweedFS volume directory would pile up in the
//! temp dir on every test run. Each scratch directory therefore holds an `owner.lock` that its
//! test process keeps flock'ed for as long as it lives; the kernel drops the lock when the
//! process ends, however it ends. The next start sweeps every directory whose lock it can take.

use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Once;

use rustix::fs::{flock, FlockOperation};
use tempfile::TempDir;

const OWNER_LOCK: &str = "owner.lock";

/// A directory under the scratch root, removed on drop (or by a later sweep).
pub(crate) struct Scratch {
    dir: TempDir,
    // Held, never read: the open, locked file is what marks the directory as in use.
    _owner: File,
}

impl Scratch {
    /// Creates `<temp>/bulkwire-testenv-<uid>/<prefix>XXXXXX`, locked by this process.
    pub(crate) fn new(prefix: &str) -> Result<Scratch, String> {
        let root = root()?;
        sweep_once(&root);
        let dir = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(&root)
            .map_err(|e| format!("cannot create a scratch dir in {}: {e}", root.display()))?;
        let owner = lock_new_dir(dir.path())?;
        Ok(Scratch { dir, _owner: owner })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// A fresh, empty directory `name` for a test's own files (configs, payloads, a server's data
/// directory), inside this process's scratch directory. Tests are not expected to remove it:
/// the whole process directory goes when a later test process sweeps, once this one has ended
/// (a test that panics midway would otherwise leak its files into the temp dir).
pub fn test_dir(name: &str) -> Result<PathBuf, String> {
    static PROCESS: std::sync::OnceLock<Result<Scratch, String>> = std::sync::OnceLock::new();
    let own = PROCESS.get_or_init(|| Scratch::new("tests-"));
    let own = own.as_ref().map_err(Clone::clone)?;
    let dir = own.path().join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// The scratch root, one per user, traversable by others so a server run as `postgres` can
/// reach its own directory inside.
pub(crate) fn root() -> Result<PathBuf, String> {
    let uid = rustix::process::getuid().as_raw();
    let root = std::env::temp_dir().join(format!("bulkwire-testenv-{uid}"));
    fs::create_dir_all(&root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
    fs::set_permissions(&root, fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("cannot chmod {}: {e}", root.display()))?;
    Ok(root)
}

/// Locks the lock file under a temporary name and only then renames it into place, so a
/// concurrent sweep never finds an `owner.lock` that nobody holds yet.
fn lock_new_dir(dir: &Path) -> Result<File, String> {
    let fresh = dir.join("owner.lock.new");
    let file =
        File::create(&fresh).map_err(|e| format!("cannot create {}: {e}", fresh.display()))?;
    flock(&file, FlockOperation::LockExclusive)
        .map_err(|e| format!("cannot lock {}: {e}", fresh.display()))?;
    fs::rename(&fresh, dir.join(OWNER_LOCK))
        .map_err(|e| format!("cannot rename {}: {e}", fresh.display()))?;
    Ok(file)
}

/// Blocks until this process holds the exclusive lock on `path` (created if missing); the lock
/// lasts as long as the returned file is open. Serialises installs across test processes.
pub(crate) fn exclusive_lock(path: &Path) -> Result<File, String> {
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| format!("cannot open lock file {}: {e}", path.display()))?;
    flock(&file, FlockOperation::LockExclusive)
        .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
    Ok(file)
}

fn sweep_once(root: &Path) {
    static SWEPT: Once = Once::new();
    SWEPT.call_once(|| sweep(root));
}

/// Removes the directories whose owner is gone, after letting each server kind clean up what
/// it left outside its directory. Best effort: a failure here must not fail the test.
fn sweep(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for dir in entries.flatten().map(|e| e.path()) {
        // A directory without a lock is being created right now: leave it alone.
        let Ok(lock) = File::open(dir.join(OWNER_LOCK)) else {
            continue;
        };
        if flock(&lock, FlockOperation::NonBlockingLockExclusive).is_ok() {
            crate::seaweed::forget_stale(&dir);
            let _ = fs::remove_dir_all(&dir);
        }
    }
}
