//! Identity (ID-1..3) and the Controller's capabilities (CT-1), plus start-up and shutdown of
//! the socket.

use storch::csi::proto::controller_service_capability::rpc::Type as Rpc;
use storch::csi::proto::plugin_capability::{Type as PluginType, service};
use storch::csi::proto::{
    ControllerGetCapabilitiesRequest, GetPluginCapabilitiesRequest, GetPluginInfoRequest,
    ProbeRequest,
};

use storch::csi::proto;

use super::{Csi, code};

/// ID-1: a non-empty name of at most 63 characters with letters at both ends (the default,
/// then one given with --csi-driver-name), and a vendor version.
#[tokio::test]
async fn plugin_info_names_the_driver() {
    let csi = Csi::start().await;
    assert_eq!(csi.plugin_name().await, "csi.storch.io");
    drop(csi);
    let csi = Csi::start_with(&["--csi-driver-name", "csi.example.com"]).await;
    assert_eq!(csi.plugin_name().await, "csi.example.com");
}

/// ID-2 and CT-1: only known types; the controller service, topology, and exactly the RPCs
/// storch serves.
#[tokio::test]
async fn capabilities_are_known_and_truthful() {
    let csi = Csi::start().await;
    let caps = csi
        .identity
        .clone()
        .get_plugin_capabilities(GetPluginCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner()
        .capabilities;
    let mut services = Vec::new();
    for c in &caps {
        match c.r#type.as_ref().unwrap() {
            PluginType::Service(s) => services.push(service::Type::try_from(s.r#type).unwrap()),
            PluginType::VolumeExpansion(e) => assert_eq!(e.r#type, 1, "ONLINE"),
        }
    }
    assert_eq!(
        services,
        [
            service::Type::ControllerService,
            service::Type::VolumeAccessibilityConstraints
        ]
    );
    let rpcs: Vec<Rpc> = csi
        .controller
        .clone()
        .controller_get_capabilities(ControllerGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner()
        .capabilities
        .iter()
        .map(|c| match c.r#type.as_ref().unwrap() {
            storch::csi::proto::controller_service_capability::Type::Rpc(r) => {
                Rpc::try_from(r.r#type).unwrap()
            }
        })
        .collect();
    assert_eq!(
        rpcs,
        [
            Rpc::CreateDeleteVolume,
            Rpc::PublishUnpublishVolume,
            Rpc::ListVolumes,
            Rpc::GetCapacity,
            Rpc::CreateDeleteSnapshot,
            Rpc::ListSnapshots,
            Rpc::CloneVolume,
            Rpc::PublishReadonly,
            Rpc::ExpandVolume,
            Rpc::ListVolumesPublishedNodes,
            Rpc::VolumeCondition,
            Rpc::GetVolume,
        ]
    );
    // SX-8: what is not advertised is UNIMPLEMENTED.
    let mut c = csi.controller.clone();
    let unimplemented = [
        code(
            c.controller_modify_volume(proto::ControllerModifyVolumeRequest::default())
                .await,
        ),
        code(c.get_snapshot(proto::GetSnapshotRequest::default()).await),
    ];
    assert_eq!(unimplemented, [tonic::Code::Unimplemented; 2]);
}

/// ID-3: the leader is ready.
#[tokio::test]
async fn probe_is_ready_on_the_leader() {
    let csi = Csi::start().await;
    let probe = csi
        .identity
        .clone()
        .probe(ProbeRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(probe.ready, Some(true));
}

/// A stale socket file is replaced at start; a clean stop removes the socket; a path that
/// is not a socket is refused with the flag named.
#[tokio::test]
async fn the_socket_is_replaced_when_stale_and_removed_at_stop() {
    let mut csi = Csi::start().await;
    assert!(csi.socket.exists());
    csi.server.stop();
    assert!(!csi.socket.exists(), "the socket is removed at stop");

    let dir = tempfile::tempdir().unwrap();
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    let endpoint = format!("unix://{}", stale.display());
    let mut server = crate::support::Server::start_with(
        &dir.path().join("d"),
        &["--csi-endpoint", &endpoint],
        &[],
    );
    let channel = super::connect(&stale).await;
    let info = storch::csi::proto::identity_client::IdentityClient::new(channel)
        .get_plugin_info(GetPluginInfoRequest {})
        .await
        .unwrap();
    assert_eq!(info.into_inner().name, "csi.storch.io");
    server.stop();

    let file = dir.path().join("file.sock");
    std::fs::write(&file, "x").unwrap();
    let endpoint = format!("unix://{}", file.display());
    let (mut child, log) =
        crate::support::server::spawn(&dir.path().join("e"), &["--csi-endpoint", &endpoint], &[]);
    assert!(!crate::support::server::exit_status(&mut child).success());
    let log = std::fs::read_to_string(log).unwrap();
    assert!(log.contains("CSI socket"), "{log}");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "x",
        "the file is left alone"
    );
}

/// ID-3 and SX-6 with etcd replication: a standby answers Probe with `ready: false` and
/// refuses commands with UNAVAILABLE (the sidecars retry); once it leads, it is ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_is_not_ready_until_it_leads() {
    let _heavy = crate::support::heavy();
    let etcd = crate::support::etcd::Etcd::start().await;
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("secret.key");
    std::fs::write(&key, [7u8; 32]).unwrap();
    let http = storch::net::client();
    let start = |id: &str| {
        let socket = tmp.path().join(format!("{id}.sock"));
        let endpoint = format!("unix://{}", socket.display());
        let args = [
            "--etcd-endpoints",
            etcd.endpoint.as_str(),
            "--etcd-lease-ttl",
            "2s",
            "--etcd-identity",
            id,
            "--secrets-key-file",
            key.to_str().unwrap(),
            "--csi-endpoint",
            endpoint.as_str(),
        ];
        (
            crate::support::Server::start_with(&tmp.path().join(id), &args, &[]),
            socket,
        )
    };
    let status = async |server: &crate::support::Server| {
        let url = format!("{}/readyz", server.url);
        crate::support::get_json(&http, &url).await.1["status"].clone()
    };
    let (mut leader, leader_socket) = start("a");
    crate::support::eventually("a leads", async || status(&leader).await == "ok").await;
    let (standby, standby_socket) = start("b");
    crate::support::eventually("b is a standby", async || {
        status(&standby).await == "standby"
    })
    .await;

    let probe = async |socket: &std::path::Path| {
        let channel = super::connect(socket).await;
        let mut identity = storch::csi::proto::identity_client::IdentityClient::new(channel);
        identity
            .probe(ProbeRequest {})
            .await
            .unwrap()
            .into_inner()
            .ready
    };
    assert_eq!(probe(&leader_socket).await, Some(true));
    assert_eq!(probe(&standby_socket).await, Some(false));
    let mut controller = storch::csi::proto::controller_client::ControllerClient::new(
        super::connect(&standby_socket).await,
    );
    let refused = controller
        .create_volume(super::create_request("on-the-standby"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("standby"),
        "{}",
        refused.message()
    );

    leader.stop();
    crate::support::eventually("b leads", async || {
        probe(&standby_socket).await == Some(true)
    })
    .await;
}
