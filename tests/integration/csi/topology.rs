//! Topology (spec §11): backends declare where their pools are reachable from
//! (`supportedTopologies`); CreateVolume places only in a requisite segment, preferred ones
//! first, and answers the pool's segments; GetCapacity counts the pools of one segment.

use serde_json::{Value, json};
use storch::csi::proto::volume_capability::access_mode::Mode;
use storch::csi::proto::volume_content_source::{Type, VolumeSource};
use storch::csi::proto::{
    CreateVolumeRequest, GetCapacityRequest, Topology, TopologyRequirement, Volume,
    VolumeContentSource,
};
use tonic::Code;

use super::{Csi, code, create_request, mount, params, unique};
use crate::support;

const ZONE: &str = "topology.kubernetes.io/zone";

fn zone(z: &str) -> Topology {
    Topology {
        segments: params(&[(ZONE, z)]),
    }
}

/// Two fake backends of the same media, `east` in zone z1 and `west` in zone z2.
async fn zoned() -> Csi {
    let backends = [("east", "z1"), ("west", "z2")].map(|(name, z)| {
        let mut b = support::fake_backend(name, "file", &[("pool1", support::ssd())]);
        b["supportedTopologies"] = json!([{ZONE: z}]);
        b
    });
    Csi::start_on(&[], &backends).await
}

fn in_zones(name: &str, requisite: &[&str], preferred: &[&str]) -> CreateVolumeRequest {
    CreateVolumeRequest {
        parameters: params(&[("media", "ssd")]),
        accessibility_requirements: Some(TopologyRequirement {
            requisite: requisite.iter().map(|z| zone(z)).collect(),
            preferred: preferred.iter().map(|z| zone(z)).collect(),
        }),
        ..create_request(name)
    }
}

async fn create(csi: &Csi, request: CreateVolumeRequest) -> Result<Volume, tonic::Status> {
    let r = csi.controller.clone().create_volume(request).await?;
    Ok(r.into_inner().volume.unwrap())
}

/// The backend a volume landed on (its volume context).
fn backend_of(v: &Volume) -> &str {
    &v.volume_context["storch.io/backend"]
}

/// Requisite segments choose the pools, preferred ones their order; the answer carries the
/// pool's segment; no pool in the requisite is RESOURCE_EXHAUSTED (and creates nothing); a
/// repeat from a segment the volume is not reachable from is ALREADY_EXISTS; a clone stays
/// in its source's zone.
#[tokio::test]
async fn creates_land_in_the_requested_zones() {
    let csi = zoned().await;
    for _ in 0..4 {
        let v = create(&csi, in_zones(&unique("east"), &["z1"], &[]))
            .await
            .unwrap();
        assert_eq!(backend_of(&v), "east");
        assert_eq!(v.accessible_topology, [zone("z1")]);
        let v = create(
            &csi,
            in_zones(&unique("pref"), &["z1", "z2"], &["z2", "z1"]),
        )
        .await
        .unwrap();
        assert_eq!(backend_of(&v), "west", "the preferred zone first");
    }
    let name = unique("nowhere");
    let e = create(&csi, in_zones(&name, &["z3"], &[]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e:?}");
    assert!(e.message().contains("topology"), "{}", e.message());
    let rest = csi.get_text(&format!("/trident/v1/volume/{name}")).await;
    assert!(rest.contains("not found"), "nothing was made: {rest}");

    let name = unique("once");
    let v = create(&csi, in_zones(&name, &["z2"], &[])).await.unwrap();
    assert_eq!(
        create(&csi, in_zones(&name, &["z2"], &[])).await.unwrap(),
        v
    );
    let moved = create(&csi, in_zones(&name, &["z1"], &[])).await;
    assert_eq!(code(moved), Code::AlreadyExists);

    let clone = CreateVolumeRequest {
        volume_content_source: Some(VolumeContentSource {
            r#type: Some(Type::Volume(VolumeSource {
                volume_id: v.volume_id.clone(),
            })),
        }),
        ..in_zones(&unique("clone"), &["z1"], &[])
    };
    assert_eq!(code(create(&csi, clone).await), Code::ResourceExhausted);
    let bad = create(
        &csi,
        CreateVolumeRequest {
            accessibility_requirements: Some(TopologyRequirement {
                requisite: vec![zone("z1")],
                preferred: vec![zone("z2")],
            }),
            ..create_request(&unique("bad"))
        },
    )
    .await
    .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    assert!(
        bad.message()
            .starts_with("accessibility_requirements.preferred[0]"),
        "{}",
        bad.message()
    );
}

/// GetCapacity with a segment counts only the pools reachable from it; a bad segment is
/// refused naming the field. A backend without topology is reachable from every zone and its
/// volumes answer no segment.
#[tokio::test]
async fn capacity_per_segment_and_backends_without_topology() {
    let csi = zoned().await;
    let mut c = csi.controller.clone();
    let capacity = |t: Option<Topology>| GetCapacityRequest {
        volume_capabilities: vec![mount(Mode::SingleNodeWriter)],
        parameters: params(&[("media", "ssd")]),
        accessible_topology: t,
    };
    let pool = 100i64 << 30;
    let all = c.get_capacity(capacity(None)).await.unwrap().into_inner();
    assert_eq!(all.available_capacity, 2 * pool);
    let z1 = c
        .get_capacity(capacity(Some(zone("z1"))))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(z1.available_capacity, pool);
    let z3 = c
        .get_capacity(capacity(Some(zone("z3"))))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(z3.available_capacity, 0);
    let e = c
        .get_capacity(capacity(Some(Topology {
            segments: params(&[("Bad Key", "z")]),
        })))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message().starts_with("accessible_topology"),
        "{}",
        e.message()
    );

    let everywhere = support::fake_backend("everywhere", "file", &[("pool1", support::ssd())]);
    support::create(&csi.http, &csi.server.url, "backend", &everywhere).await;
    support::backend_online(&csi.http, &csi.server.url, "everywhere").await;
    let z3 = c
        .get_capacity(capacity(Some(zone("z3"))))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(z3.available_capacity, pool, "the backend without topology");
    let v = create(&csi, in_zones(&unique("any"), &["z3"], &[]))
        .await
        .unwrap();
    assert_eq!(backend_of(&v), "everywhere");
    assert!(
        v.accessible_topology.is_empty(),
        "reachable from everywhere"
    );
}

/// `supportedTopologies` is checked strictly (a refusal names the field and adds nothing) and
/// shown per pool by GET backend; explain (REST and `storch explain`'s query) says which
/// pools a topology leaves out.
#[tokio::test]
async fn supported_topologies_are_validated_and_shown() {
    let csi = zoned().await;
    let mut bad = support::fake_backend("bad", "file", &[("pool1", support::ssd())]);
    bad["supportedTopologies"] = json!([{ZONE: "z1"}, {ZONE: "not a zone"}]);
    let r = csi
        .http
        .post(format!("{}/trident/v1/backend", csi.server.url))
        .json(&bad)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body = r.text().await.unwrap();
    assert!(body.contains("supportedTopologies[1]"), "{body}");
    let listed = csi.get_text("/trident/v1/backend").await;
    assert!(!listed.contains("\"bad\""), "nothing was added: {listed}");

    let east: Value =
        serde_json::from_str(&csi.get_text("/trident/v1/backend/east").await).unwrap();
    assert_eq!(
        east["backend"]["storage"]["pool1"]["supportedTopologies"],
        json!([{ZONE: "z1"}])
    );
    // The class CreateVolume made for these parameters.
    create(&csi, in_zones(&unique("e"), &["z1"], &[]))
        .await
        .unwrap();
    let classes: Value =
        serde_json::from_str(&csi.get_text("/trident/v1/storageclass").await).unwrap();
    let class = classes["storageClasses"][0].as_str().unwrap().to_string();
    let explained: Value = serde_json::from_str(
        &csi.get_text(&format!(
            "/trident/v1/storageclass/{class}/explain?topology={ZONE}=z1"
        ))
        .await,
    )
    .unwrap();
    let pools = explained["explanation"]["pools"].as_array().unwrap();
    let west = pools.iter().find(|p| p["backend"] == "west").unwrap();
    assert_eq!(west["candidate"], false);
    assert!(
        west["reasons"][0]
            .as_str()
            .unwrap()
            .contains("outside the requested topology"),
        "{west}"
    );
    let east = pools.iter().find(|p| p["backend"] == "east").unwrap();
    assert_eq!(east["candidate"], true, "{east}");
}
