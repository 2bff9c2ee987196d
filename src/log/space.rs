//! The log's reserve of free space: sled never meets a full disk.
//!
//! After one failed write sled fails every later operation, so a disk that fills up would
//! leave the log poisoned until a restart. Instead the writer asks the filesystem of the
//! log's dir how much is free (`statvfs`: blocks available to this user) before each group
//! commit, and refuses the batch without touching sled when less than the reserve is left
//! ([`LogError::DiskFull`]). While it is short the writer looks again every [`RECHECK`], so
//! writes, readiness and `storch_log_writable` come back by themselves once space is freed.
//! Each change of state is logged once. A checkpoint needs its own size on top of the
//! reserve; a refused one is only skipped.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use super::LogError;

/// The reserve when none is set (`serve --log-min-free`): far more than the largest batch
/// (`MAX_BATCH_EVENTS` records of a few KiB) and sled's own bookkeeping need.
pub const DEFAULT_MIN_FREE: u64 = 64 << 20;

/// How often the writer looks at the disk again while it is below the reserve.
pub(crate) const RECHECK: Duration = Duration::from_secs(1);

/// Where the free bytes come from: `statvfs` of the log's dir, or a test's figure.
pub(crate) type FreeBytes = Arc<dyn Fn() -> std::io::Result<u64> + Send + Sync>;

/// What a look at the disk found when it was below the reserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Short {
    pub free: u64,
    pub reserve: u64,
}

impl Short {
    pub fn error(self) -> LogError {
        LogError::DiskFull {
            free: self.free,
            reserve: self.reserve,
            need: 0,
        }
    }
}

/// The reserve of one log: its size, its source of free bytes, and whether the last look
/// found the disk short.
pub(crate) struct Reserve {
    path: PathBuf,
    min_free: AtomicU64,
    free: RwLock<FreeBytes>,
    short: Mutex<Option<Short>>,
}

impl Reserve {
    /// The reserve of the filesystem holding `dir`, [`DEFAULT_MIN_FREE`] until set.
    pub fn of_dir(dir: &Path) -> Reserve {
        let at = dir.to_path_buf();
        Reserve {
            path: dir.to_path_buf(),
            min_free: AtomicU64::new(DEFAULT_MIN_FREE),
            free: RwLock::new(Arc::new(move || available(&at))),
            short: Mutex::new(None),
        }
    }

    pub fn set_min_free(&self, bytes: u64) {
        self.min_free.store(bytes, Ordering::Relaxed);
    }

    /// Test support: free bytes come from `source` from now on.
    pub fn set_source(&self, source: FreeBytes) {
        *self.free.write().unwrap_or_else(|e| e.into_inner()) = source;
    }

    /// The disk's state as the last look found it: `Some` while below the reserve.
    pub fn short(&self) -> Option<Short> {
        *self.short.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Looks at the disk before a batch (and, while short, every [`RECHECK`]): `Some` when
    /// less than the reserve is free. A change of state is logged, once.
    pub fn check(&self) -> Option<Short> {
        let looked = self.look();
        let now =
            looked.and_then(|(free, reserve)| (free < reserve).then_some(Short { free, reserve }));
        let before = std::mem::replace(
            &mut *self.short.lock().unwrap_or_else(|e| e.into_inner()),
            now,
        );
        match (before, now) {
            (None, Some(Short { free, reserve })) => tracing::error!(
                free,
                reserve,
                path = %self.path.display(),
                "the event log's disk is below its reserve of free space: writes are refused \
                 until space is freed; reads go on"
            ),
            (Some(_), None) => tracing::info!(
                free = looked.map(|(free, _)| free),
                path = %self.path.display(),
                "space was freed on the event log's disk: writes resume"
            ),
            _ => {}
        }
        now
    }

    /// Whether `need` bytes fit on the disk above the reserve (a checkpoint). Changes no
    /// state: a refused checkpoint is skipped, the log still takes batches.
    pub fn fits(&self, need: u64) -> Result<(), LogError> {
        match self.look() {
            Some((free, reserve)) if free < reserve.saturating_add(need) => {
                Err(LogError::DiskFull {
                    free,
                    reserve,
                    need,
                })
            }
            _ => Ok(()),
        }
    }

    /// Free bytes and the reserve; `None` when the reserve is off (0) or the filesystem
    /// cannot say (then sled decides, as without a reserve).
    fn look(&self) -> Option<(u64, u64)> {
        let reserve = self.min_free.load(Ordering::Relaxed);
        if reserve == 0 {
            return None;
        }
        let source = self.free.read().unwrap_or_else(|e| e.into_inner()).clone();
        match source() {
            Ok(free) => Some((free, reserve)),
            Err(e) => {
                tracing::debug!(error = %e, path = %self.path.display(), "statvfs failed");
                None
            }
        }
    }
}

/// Bytes an unprivileged writer may still use on the filesystem holding `dir`.
fn available(dir: &Path) -> std::io::Result<u64> {
    let st = rustix::fs::statvfs(dir)?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reserve_with(free: &Arc<AtomicU64>, min_free: u64) -> Reserve {
        let r = Reserve::of_dir(Path::new("/nonexistent"));
        r.set_min_free(min_free);
        let free = free.clone();
        r.set_source(Arc::new(move || Ok(free.load(Ordering::SeqCst))));
        r
    }

    #[test]
    fn below_the_reserve_is_short_until_space_returns() {
        let free = Arc::new(AtomicU64::new(100));
        let r = reserve_with(&free, 64);
        assert_eq!(r.check(), None);
        assert_eq!(r.short(), None);

        free.store(63, Ordering::SeqCst);
        let short = Short {
            free: 63,
            reserve: 64,
        };
        assert_eq!(r.check(), Some(short));
        assert_eq!(r.short(), Some(short));
        assert_eq!(
            short.error().to_string(),
            "the event log's disk is full: 63 B free, 64 B reserved"
        );
        // Exactly the reserve left is enough.
        free.store(64, Ordering::SeqCst);
        assert_eq!(r.check(), None);
        assert_eq!(r.short(), None);
    }

    #[test]
    fn a_checkpoint_needs_its_size_above_the_reserve_and_changes_no_state() {
        let free = Arc::new(AtomicU64::new(100));
        let r = reserve_with(&free, 64);
        assert!(r.fits(36).is_ok());
        let err = r.fits(37).unwrap_err();
        assert!(
            matches!(
                err,
                LogError::DiskFull {
                    free: 100,
                    reserve: 64,
                    need: 37
                }
            ),
            "{err:?}"
        );
        assert_eq!(r.short(), None, "batches still go through");
        assert_eq!(r.check(), None);
    }

    #[test]
    fn a_reserve_of_zero_or_an_unknown_figure_refuses_nothing() {
        let free = Arc::new(AtomicU64::new(0));
        let r = reserve_with(&free, 0);
        assert_eq!(r.check(), None);
        assert!(r.fits(u64::MAX).is_ok());
        r.set_min_free(1);
        assert!(r.check().is_some());
        // A filesystem that cannot say leaves it to sled, as without a reserve.
        r.set_source(Arc::new(|| Err(std::io::Error::other("no statvfs here"))));
        assert_eq!(r.check(), None);
        assert_eq!(r.short(), None);
    }

    #[test]
    fn statvfs_reads_the_filesystem_of_the_dir() {
        let dir = tempfile::tempdir().unwrap();
        let free = available(dir.path()).unwrap();
        assert!(free > 0, "a temp dir's filesystem has room");
        let r = Reserve::of_dir(dir.path());
        r.set_min_free(u64::MAX);
        let short = r.check().expect("no disk has that much");
        assert_eq!(short.reserve, u64::MAX);
        assert!(short.free > 0);
    }
}
