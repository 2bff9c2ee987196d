//! Raw arguments of the client verbs (`get`, `create`, …) and of the offline audit commands
//! (`events verify`, `events export`, `replay`), as tridentctl spells them where it has them.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

const CLIENT_OPTIONS: &str = "Client options";

/// Options every client verb understands; global, so they may come before or after the verb.
#[derive(Debug, Clone, Default, Args)]
pub struct ClientArgs {
    /// The storch server: HOST:PORT, http://HOST:PORT or https://HOST:PORT (else
    /// TRIDENT_SERVER, else 127.0.0.1:8000).
    #[arg(
        short = 's',
        long,
        global = true,
        help_heading = CLIENT_OPTIONS,
        env = "STORCH_SERVER",
        value_name = "HOST:PORT"
    )]
    pub server: Option<String>,

    /// Output format: a table, a wider table, {"items":[…]} as JSON or YAML, or names.
    #[arg(
        short = 'o',
        long,
        global = true,
        help_heading = CLIENT_OPTIONS,
        value_enum,
        value_name = "FORMAT",
        default_value_t = OutputFormat::Table
    )]
    pub output: OutputFormat,

    /// A bearer token sent with every request.
    #[arg(
        long,
        global = true,
        help_heading = CLIENT_OPTIONS,
        env = "STORCH_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,

    /// A PEM file of CA certificates to trust for an https server (instead of the system's).
    #[arg(
        long,
        global = true,
        help_heading = CLIENT_OPTIONS,
        env = "STORCH_CA_CERT",
        value_name = "FILE"
    )]
    pub ca_cert: Option<PathBuf>,

    /// Print each request and response (status and body) on stderr.
    #[arg(short = 'd', long, global = true, help_heading = CLIENT_OPTIONS)]
    pub debug: bool,
}

/// How results are printed: `table` (the main fields; tridentctl's `ps` is an alias), `wide`
/// (more columns), `json` (`{"items":[…]}`, indented by 2), `yaml` (the same document), `name`
/// (one per line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum OutputFormat {
    #[default]
    #[value(alias = "ps")]
    Table,
    Wide,
    Json,
    Yaml,
    Name,
}

/// `create KIND …`
#[derive(Debug, Clone, Subcommand)]
pub enum CreateKind {
    /// Add a backend from a Trident backend file (JSON or YAML).
    #[command(visible_aliases = ["b", "backends"])]
    Backend(FileArg),
    /// Add a storage class from a file (JSON or YAML).
    #[command(name = "storageclass", visible_aliases = ["sc", "storageclasses"])]
    StorageClass(FileArg),
    /// Create a volume from a file, or as a clone of a volume or of a snapshot.
    #[command(visible_aliases = ["v", "volumes"])]
    Volume(CreateVolumeArgs),
    /// Take a snapshot of a volume.
    #[command(visible_aliases = ["snap", "snapshots"])]
    Snapshot {
        /// VOLUME/SNAPSHOT
        #[arg(value_name = "VOLUME/SNAPSHOT")]
        target: String,
    },
}

#[derive(Debug, Clone, Args)]
pub struct FileArg {
    /// The file to read; `-` reads stdin.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct CreateVolumeArgs {
    /// The volume's name (required for a clone; with -f it must match the file's, if any).
    pub name: Option<String>,
    /// The file to read; `-` reads stdin.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Clone this volume, or this snapshot of it.
    #[arg(long, value_name = "VOLUME[/SNAPSHOT]")]
    pub clone_from: Option<String>,
}

/// `update KIND NAME …`
#[derive(Debug, Clone, Subcommand)]
pub enum UpdateKind {
    /// Replace a backend's config with a file's (JSON or YAML), or (--state) suspend it or
    /// set it back to normal.
    #[command(visible_aliases = ["b", "backends"])]
    Backend {
        /// The backend to update.
        #[arg(value_name = "NAME")]
        names: Vec<String>,
        #[command(flatten)]
        file: FileArg,
        /// Instead of a new config: `suspended` (no new volumes land there; its volumes are
        /// still served) or `normal`.
        #[arg(long, value_enum, value_name = "STATE", conflicts_with = "file")]
        state: Option<BackendUserState>,
    },
}

/// `update backend NAME --state STATE`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendUserState {
    Suspended,
    Normal,
}

impl BackendUserState {
    /// The value `POST /backend/{b}/state` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            BackendUserState::Suspended => "suspended",
            BackendUserState::Normal => "normal",
        }
    }
}

/// `get KIND [NAME…]`
#[derive(Debug, Clone, Subcommand)]
pub enum GetKind {
    /// Show backends (all of them without names).
    #[command(visible_aliases = ["b", "backends"])]
    Backend {
        #[arg(value_name = "NAME")]
        names: Vec<String>,
    },
    /// Show storage classes.
    #[command(name = "storageclass", visible_aliases = ["sc", "storageclasses"])]
    StorageClass {
        #[arg(value_name = "NAME")]
        names: Vec<String>,
    },
    /// Show volumes.
    #[command(visible_aliases = ["v", "volumes"])]
    Volume {
        #[arg(value_name = "NAME")]
        names: Vec<String>,
    },
    /// Show snapshots: all, a volume's (VOLUME), or one (VOLUME/SNAPSHOT).
    #[command(visible_aliases = ["snap", "snapshots"])]
    Snapshot {
        #[arg(value_name = "VOLUME[/SNAPSHOT]")]
        targets: Vec<String>,
    },
    /// Show the storage pools of backends (of all of them without names): free space, what
    /// each offers, and (wide) the storage classes that use it.
    #[command(visible_aliases = ["pools"])]
    Pool {
        #[arg(value_name = "BACKEND")]
        backends: Vec<String>,
    },
    /// Show the volumes the arrays hold under storch's names that no storch volume claims
    /// (listed from every backend now); `import volume` adopts one.
    #[command(visible_aliases = ["orphans"])]
    Orphan,
}

/// `import volume BACKEND INTERNAL_NAME | BACKEND:POOL/VOLUME --name N --class C`
#[derive(Debug, Clone, Subcommand)]
pub enum ImportKind {
    /// Adopt an array volume under a storch name and storage class.
    #[command(visible_aliases = ["v", "volumes"])]
    Volume {
        /// The backend, or a volume handle BACKEND:VOLUME / BACKEND:POOL/VOLUME (the
        /// NexentaStor seed's configName:pool/volumeGroup/volume) without INTERNAL_NAME.
        #[arg(value_name = "BACKEND")]
        backend: String,
        /// The volume's name on the array.
        #[arg(value_name = "INTERNAL_NAME")]
        internal_name: Option<String>,
        /// The storch volume name it gets.
        #[arg(long)]
        name: String,
        /// The storage class it belongs to (it must match the volume's pool).
        #[arg(long)]
        class: String,
        /// Track it without ever destroying it: a delete forgets it, the array keeps it.
        #[arg(long)]
        no_manage: bool,
    },
}

/// `reconcile backend NAME`
#[derive(Debug, Clone, Subcommand)]
pub enum ReconcileKind {
    /// Compare a backend's volumes with its array now: volumes missing from it, changed on
    /// it, and orphans.
    #[command(visible_aliases = ["b", "backends"])]
    Backend { name: String },
}

/// `delete KIND NAME… | --all`
#[derive(Debug, Clone, Subcommand)]
pub enum DeleteKind {
    /// Delete backends (one with volumes goes offline until its last volume is deleted).
    #[command(visible_aliases = ["b", "backends"])]
    Backend(DeleteNames),
    /// Delete storage classes.
    #[command(name = "storageclass", visible_aliases = ["sc", "storageclasses"])]
    StorageClass(DeleteNames),
    /// Delete volumes. A volume with snapshots is refused unless --with-snapshots is given
    /// (its snapshots go with it).
    #[command(visible_aliases = ["v", "volumes"])]
    Volume(DeleteVolumeArgs),
    /// Delete snapshots.
    #[command(visible_aliases = ["snap", "snapshots"])]
    Snapshot {
        #[arg(value_name = "VOLUME/SNAPSHOT")]
        targets: Vec<String>,
    },
}

#[derive(Debug, Clone, Args)]
pub struct DeleteNames {
    #[arg(value_name = "NAME")]
    pub names: Vec<String>,
    /// Delete every object of this kind.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Clone, Args)]
pub struct DeleteVolumeArgs {
    #[command(flatten)]
    pub names: DeleteNames,
    /// Also delete the volumes' snapshots (a volume's snapshots go with it; without this, a
    /// volume that has any is refused, and nothing is deleted).
    #[arg(long)]
    pub with_snapshots: bool,
}

/// `resize KIND NAME SIZE`
#[derive(Debug, Clone, Subcommand)]
pub enum ResizeKind {
    /// Grow a volume.
    #[command(visible_aliases = ["v", "volumes"])]
    Volume {
        name: String,
        /// The new size, e.g. 2Gi.
        size: String,
    },
}

/// `explain KIND NAME`
#[derive(Debug, Clone, Subcommand)]
pub enum ExplainKind {
    /// For every pool of every backend: would a volume of this class go there, and if not, why.
    #[command(name = "storageclass", visible_aliases = ["sc", "storageclasses"])]
    StorageClass {
        name: String,
        /// The protocol of the volume to place.
        #[arg(long, value_enum)]
        protocol: Option<ExplainProtocol>,
        /// The size of the volume to place, e.g. 10Gi (checked against free space).
        #[arg(long)]
        size: Option<String>,
        /// A topology segment the volume must be reachable from, KEY=VALUE[,KEY=VALUE…]
        /// (e.g. topology.kubernetes.io/zone=z1).
        #[arg(long)]
        topology: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExplainProtocol {
    File,
    Block,
}

impl ExplainProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            ExplainProtocol::File => "file",
            ExplainProtocol::Block => "block",
        }
    }
}

/// `events [--object …] [--since …] [--follow]`, or `events verify|export --data-dir DIR`.
#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct EventsArgs {
    #[command(subcommand)]
    pub offline: Option<EventsOffline>,
    #[command(flatten)]
    pub filter: EventFilterArgs,
    /// Keep printing new events as they are committed (until interrupted).
    #[arg(long)]
    pub follow: bool,
}

/// Which events to show.
#[derive(Debug, Clone, Default, Args)]
pub struct EventFilterArgs {
    /// Only the events of one object: volume/NAME, backend/NAME or storageclass/NAME.
    #[arg(long, value_name = "KIND/NAME")]
    pub object: Option<String>,
    /// Only events with this sequence number or a later one.
    #[arg(long, value_name = "SEQ")]
    pub since: Option<u64>,
    /// At most this many events.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
}

/// Audits of a stopped server's data dir (no server needed).
#[derive(Debug, Clone, Subcommand)]
pub enum EventsOffline {
    /// Walk the log's hash chain; exit 1 and name the first bad sequence if it is broken.
    Verify(DataDirArg),
    /// Write the log as JSON lines (the REST events' shape) to stdout.
    Export {
        #[command(flatten)]
        data_dir: DataDirArg,
        #[command(flatten)]
        filter: EventFilterArgs,
    },
}

#[derive(Debug, Clone, Args)]
pub struct DataDirArg {
    /// The data dir of a stopped storch (the one `storch serve --data-dir` used).
    #[arg(
        long,
        env = "STORCH_DATA_DIR",
        value_name = "DIR",
        default_value = "./storch-data"
    )]
    pub data_dir: PathBuf,
}

/// `replay --data-dir DIR [--until SEQ|TIME]`
#[derive(Debug, Clone, Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    pub data_dir: DataDirArg,
    /// Stop after this sequence number, or after the last event committed at or before this
    /// RFC 3339 time (e.g. 2026-03-01T12:00:00Z) [default: the whole log].
    #[arg(long, value_name = "SEQ|TIME")]
    pub until: Option<String>,
}

/// `version [--client]`
#[derive(Debug, Clone, Args)]
pub struct VersionArgs {
    /// Only the client's version (no server needed).
    #[arg(long)]
    pub client: bool,
}

/// `completion SHELL`
#[derive(Debug, Clone, Args)]
pub struct CompletionArgs {
    pub shell: clap_complete::Shell,
}
