//! `CoreOptions`, the settings of the core.

use std::sync::Arc;

/// Settings of the core.
#[derive(Debug, Clone)]
pub struct CoreOptions {
    /// Where the event log (and secrets key) live.
    pub data_dir: std::path::PathBuf,
    pub durability: crate::log::Durability,
    /// A volume actor stops after this long without messages.
    pub volume_idle: std::time::Duration,
    /// Write a projection checkpoint after this many events.
    pub checkpoint_every: u64,
    /// Replicate the log through etcd (leader election, standbys).
    pub replication: Option<Arc<crate::replication::Node>>,
    /// The key that seals secrets in the log; `None`: `data_dir/secret.key`, created if
    /// missing.
    pub secrets_key: Option<std::path::PathBuf>,
    /// Compare every backend with its array this often (missing volumes, changes, orphans);
    /// zero: only at a backend's start and on request.
    pub reconcile_interval: std::time::Duration,
    /// Start on a log that lacks acknowledged records or holds a corrupt record, cutting it
    /// back to the last good record (`serve --truncate-corrupt-tail`); otherwise such a log
    /// stops the start.
    pub truncate_corrupt_tail: bool,
    /// The directories below which a local backend added or updated over the API may put its
    /// pools (`serve --local-root`); empty: the data dir. The `serve --config` file is not
    /// bound to them.
    pub local_roots: Vec<std::path::PathBuf>,
    /// Free space the event log keeps on its disk (`serve --log-min-free`; 0: none): below
    /// it writes are refused, before sled sees them, until space is freed.
    pub log_min_free: u64,
}

impl CoreOptions {
    /// `local_roots`, or the data dir when none is given.
    pub fn allowed_local_roots(&self) -> Vec<std::path::PathBuf> {
        if self.local_roots.is_empty() {
            vec![self.data_dir.clone()]
        } else {
            self.local_roots.clone()
        }
    }
}

impl Default for CoreOptions {
    fn default() -> Self {
        CoreOptions {
            data_dir: "storch-data".into(),
            durability: crate::log::Durability::Flush,
            volume_idle: std::time::Duration::from_secs(30),
            checkpoint_every: 10_000,
            replication: None,
            secrets_key: None,
            reconcile_interval: std::time::Duration::from_secs(600),
            truncate_corrupt_tail: false,
            local_roots: Vec::new(),
            log_min_free: crate::log::DEFAULT_MIN_FREE,
        }
    }
}
