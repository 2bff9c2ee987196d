//! The CSI conformance suite (../shared/spec/csi.md §18): a tonic client over the unix socket
//! of a real `storch serve --csi-endpoint`, against the fake backend. One file per service:
//! `identity`, `volumes` (create, delete, validate, list, capacity, expand), `snapshots`
//! (snapshots and the volumes made from them or cloned), `arrays` (a lifecycle on local
//! directories and the SolidFire, E-Series and NexentaStor simulators; its steps are shared
//! with `ontap`), `publish` (ControllerPublish and Unpublish, ControllerGetVolume), `topology` (backends' supportedTopologies and CSI's
//! accessibility requirements), `node` and `node_rules` (the Node service on the recording
//! fake host) and `node_real` (`storch csi node` and real mounts, as root). Requirement ids
//! (ID-n, CT-n, ND-n, SX-n) are in the test names' doc comments.

mod arrays;
mod identity;
mod node;
mod node_real;
mod node_rules;
mod ontap;
mod publish;
mod snapshots;
mod topology;
mod volumes;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use storch::csi::proto::controller_client::ControllerClient;
use storch::csi::proto::identity_client::IdentityClient;
use storch::csi::proto::volume_capability::access_mode::Mode;
use storch::csi::proto::volume_capability::{AccessMode, AccessType, BlockVolume, MountVolume};
use storch::csi::proto::{
    CapacityRange, CreateVolumeRequest, DeleteVolumeRequest, VolumeCapability,
};
use tonic::transport::{Channel, Endpoint};

use crate::support::{self, Server};

/// csi-sanity's default test size.
pub const GIB10: i64 = 10 << 30;

/// `storch serve` with the CSI frontend on a socket in a temporary directory, a fake NFS
/// backend (`nfs`) and a fake iSCSI backend (`san`), and clients on the socket.
pub struct Csi {
    pub server: Server,
    pub socket: PathBuf,
    pub http: reqwest::Client,
    pub identity: IdentityClient<Channel>,
    pub controller: ControllerClient<Channel>,
    _dir: tempfile::TempDir,
}

/// Pool offers with snapshots and clones.
fn pool_offers(media: &str) -> Value {
    json!({"media": {"offer": [media]}, "snapshots": {"offer": true}, "clones": {"offer": true}})
}

impl Csi {
    pub async fn start() -> Csi {
        Csi::start_with(&[]).await
    }

    pub async fn start_with(extra: &[&str]) -> Csi {
        let backends =
            [("nfs", "file", "ssd"), ("san", "block", "hdd")].map(|(name, protocol, media)| {
                support::fake_backend(name, protocol, &[("pool1", pool_offers(media))])
            });
        Csi::start_on(extra, &backends).await
    }

    /// `storch serve --csi-endpoint … EXTRA…` with these backends added (and online).
    pub async fn start_on(extra: &[&str], backends: &[Value]) -> Csi {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let socket = dir.path().join("csi.sock");
        let endpoint = format!("unix://{}", socket.display());
        let mut args = vec!["--csi-endpoint", endpoint.as_str()];
        args.extend_from_slice(extra);
        let server = Server::start_with(&data, &args, &[]);
        storch::net::install_crypto_provider();
        let http = reqwest::Client::new();
        server.wait_ready(&http).await;
        for backend in backends {
            support::create(&http, &server.url, "backend", backend).await;
            let name = backend["backendName"].as_str().expect("a backendName");
            support::backend_online(&http, &server.url, name).await;
        }
        let channel = connect(&socket).await;
        Csi {
            identity: IdentityClient::new(channel.clone()),
            controller: ControllerClient::new(channel),
            server,
            socket,
            http,
            _dir: dir,
        }
    }

    /// Stops `storch serve` and starts it again on the same data dir and socket (no extra
    /// flags), then reconnects the clients.
    pub async fn restart(&mut self) {
        self.server.stop();
        let data = self.server.log_path.parent().unwrap().join("data");
        let endpoint = format!("unix://{}", self.socket.display());
        self.server = Server::start_with(&data, &["--csi-endpoint", &endpoint], &[]);
        self.server.wait_ready(&self.http).await;
        let channel = connect(&self.socket).await;
        self.identity = IdentityClient::new(channel.clone());
        self.controller = ControllerClient::new(channel);
    }

    /// Creates a volume and returns its id (the call must succeed).
    pub async fn create(&self, request: CreateVolumeRequest) -> String {
        let what = request.name.clone();
        match self.controller.clone().create_volume(request).await {
            Ok(r) => r.into_inner().volume.unwrap().volume_id,
            Err(s) => panic!("CreateVolume {what}: {s:?}"),
        }
    }

    pub async fn delete(&self, volume_id: &str) {
        self.controller
            .clone()
            .delete_volume(DeleteVolumeRequest {
                volume_id: volume_id.to_string(),
                secrets: HashMap::new(),
            })
            .await
            .unwrap();
    }

    /// The text of a REST GET of `path` (`/metrics`, `/trident/v1/events?…`).
    pub async fn get_text(&self, path: &str) -> String {
        let url = format!("{}{path}", self.server.url);
        self.http
            .get(url)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// GetPluginInfo's name.
    pub async fn plugin_name(&self) -> String {
        let request = storch::csi::proto::GetPluginInfoRequest {};
        let info = self
            .identity
            .clone()
            .get_plugin_info(request)
            .await
            .unwrap();
        let info = info.into_inner();
        assert!(!info.vendor_version.is_empty(), "a vendor version");
        info.name
    }
}

/// A channel over the unix socket (the URI is a placeholder; the connector dials the socket).
pub async fn connect(socket: &Path) -> Channel {
    let path = socket.to_path_buf();
    Endpoint::try_from("http://[::1]:50051")
        .unwrap()
        .connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
            let path = path.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?))
            }
        }))
        .await
        .expect("connects to the CSI socket")
}

/// A unique volume or snapshot name per test.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

pub fn mount(mode: Mode) -> VolumeCapability {
    VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode { mode: mode as i32 }),
    }
}

pub fn block(mode: Mode) -> VolumeCapability {
    VolumeCapability {
        access_type: Some(AccessType::Block(BlockVolume {})),
        access_mode: Some(AccessMode { mode: mode as i32 }),
    }
}

pub fn range(required: i64, limit: i64) -> Option<CapacityRange> {
    Some(CapacityRange {
        required_bytes: required,
        limit_bytes: limit,
    })
}

/// A CreateVolume for `name`: one single-node mount capability, no size, no parameters.
pub fn create_request(name: &str) -> CreateVolumeRequest {
    CreateVolumeRequest {
        name: name.to_string(),
        volume_capabilities: vec![mount(Mode::SingleNodeWriter)],
        ..CreateVolumeRequest::default()
    }
}

/// Parameters from pairs.
pub fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The gRPC code of a call that must fail.
#[track_caller]
pub fn code<T: std::fmt::Debug>(result: Result<T, tonic::Status>) -> tonic::Code {
    match result {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(s) => s.code(),
    }
}
