//! CreateVolume, DeleteVolume, ValidateVolumeCapabilities, ListVolumes, GetCapacity and
//! ControllerExpandVolume (CT-2..10, CT-14, CT-15, CT-26; SX-1, SX-4, SX-7).

use storch::csi::proto::volume_capability::access_mode::Mode;
use storch::csi::proto::{
    ControllerExpandVolumeRequest, CreateVolumeRequest, GetCapacityRequest, ListVolumesRequest,
    Topology, TopologyRequirement, ValidateVolumeCapabilitiesRequest, Volume,
};
use tonic::Code;

use super::{Csi, GIB10, block, code, create_request, mount, params, range, unique};

async fn list_all(csi: &Csi) -> Vec<Volume> {
    let r = csi
        .controller
        .clone()
        .list_volumes(ListVolumesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(r.next_token.is_empty());
    r.entries.into_iter().map(|e| e.volume.unwrap()).collect()
}

async fn create_volume(csi: &Csi, r: CreateVolumeRequest) -> Result<Volume, tonic::Status> {
    csi.controller
        .clone()
        .create_volume(r)
        .await
        .map(|r| r.into_inner().volume.unwrap())
}

/// CT-5 (and every missing or invalid field): INVALID_ARGUMENT naming the field, nothing
/// created; CT-3: a token storch did not issue is ABORTED.
#[tokio::test]
async fn bad_requests_name_the_field_and_change_nothing() {
    let csi = Csi::start().await;
    let mut c = csi.controller.clone();
    let cases: Vec<(CreateVolumeRequest, &str)> = vec![
        (
            CreateVolumeRequest {
                name: String::new(),
                ..create_request("x")
            },
            "name",
        ),
        (
            CreateVolumeRequest {
                volume_capabilities: vec![],
                ..create_request("x")
            },
            "volume_capabilities",
        ),
        (
            CreateVolumeRequest {
                volume_capabilities: vec![mount(Mode::Unknown)],
                ..create_request("x")
            },
            "volume_capabilities[0].access_mode.mode",
        ),
        (
            CreateVolumeRequest {
                capacity_range: range(-1, 0),
                ..create_request("x")
            },
            "capacity_range.required_bytes",
        ),
        (
            CreateVolumeRequest {
                capacity_range: range(10, 5),
                ..create_request("x")
            },
            "capacity_range.limit_bytes",
        ),
        (
            CreateVolumeRequest {
                parameters: params(&[("storagePools", "nocolon")]),
                ..create_request("x")
            },
            "parameters.storagePools",
        ),
        (
            CreateVolumeRequest {
                parameters: params(&[("colour", "red")]),
                ..create_request("x")
            },
            "colour",
        ),
        (
            CreateVolumeRequest {
                accessibility_requirements: Some(TopologyRequirement {
                    requisite: vec![Topology {
                        segments: params(&[("Topology.Storch.io/zone", "z1")]),
                    }],
                    preferred: vec![],
                }),
                ..create_request("x")
            },
            "accessibility_requirements.requisite[0]",
        ),
        (
            CreateVolumeRequest {
                mutable_parameters: params(&[("a", "b")]),
                ..create_request("x")
            },
            "mutable_parameters",
        ),
        // Raw block for writers on several nodes: the model's access-mode rule.
        (
            CreateVolumeRequest {
                volume_capabilities: vec![block(Mode::MultiNodeMultiWriter)],
                ..create_request("x")
            },
            "ReadWriteMany",
        ),
    ];
    for (request, field) in cases {
        let status = c.create_volume(request).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{field}: {status:?}");
        assert!(
            status.message().contains(field),
            "{field}: {}",
            status.message()
        );
    }
    assert!(list_all(&csi).await.is_empty(), "nothing was created");
    let e = c
        .delete_volume(storch::csi::proto::DeleteVolumeRequest::default())
        .await;
    assert_eq!(code(e), Code::InvalidArgument);
    let bad_token = ListVolumesRequest {
        starting_token: "invalid-token".into(),
        max_entries: 0,
    };
    assert_eq!(code(c.list_volumes(bad_token).await), Code::Aborted);
    let negative = ListVolumesRequest {
        starting_token: String::new(),
        max_entries: -1,
    };
    assert_eq!(code(c.list_volumes(negative).await), Code::InvalidArgument);
    let out_of_range = CreateVolumeRequest {
        capacity_range: range(1000, 1000),
        ..create_request("x")
    };
    assert_eq!(code(c.create_volume(out_of_range).await), Code::OutOfRange);
}

/// CT-4, CT-6..10, CT-14: sizes, idempotency by name, conflicts, the longest name, deletes.
#[tokio::test]
async fn create_is_idempotent_by_name_and_delete_of_the_unknown_succeeds() {
    let csi = Csi::start().await;
    let before = list_all(&csi).await.len();
    // CT-6: no capacity range.
    let plain = create_volume(&csi, create_request(&unique("plain")))
        .await
        .unwrap();
    assert!(!plain.volume_id.is_empty());
    assert_eq!(plain.capacity_bytes, 1 << 30);
    assert_eq!(list_all(&csi).await.len(), before + 1, "CT-4: one more");
    csi.delete(&plain.volume_id).await;
    assert_eq!(list_all(&csi).await.len(), before, "CT-4: back to N");
    // CT-7, CT-8: the same name and size twice is one volume.
    let name = unique("sized");
    let sized = CreateVolumeRequest {
        capacity_range: range(GIB10, 0),
        parameters: params(&[("media", "ssd")]),
        ..create_request(&name)
    };
    let first = create_volume(&csi, sized.clone()).await.unwrap();
    assert!(first.capacity_bytes >= GIB10);
    let again = create_volume(&csi, sized.clone()).await.unwrap();
    assert_eq!(first, again);
    // CT-9: the same name with another size or other parameters is ALREADY_EXISTS.
    let exact = CreateVolumeRequest {
        capacity_range: range(GIB10, GIB10),
        ..sized.clone()
    };
    assert_eq!(
        create_volume(&csi, exact).await.unwrap().capacity_bytes,
        GIB10
    );
    let double = CreateVolumeRequest {
        capacity_range: range(2 * GIB10, 2 * GIB10),
        ..sized.clone()
    };
    assert_eq!(code(create_volume(&csi, double).await), Code::AlreadyExists);
    let other = CreateVolumeRequest {
        parameters: params(&[("media", "hdd")]),
        ..sized.clone()
    };
    assert_eq!(code(create_volume(&csi, other).await), Code::AlreadyExists);
    let as_block = CreateVolumeRequest {
        volume_capabilities: vec![block(Mode::SingleNodeWriter)],
        ..sized
    };
    assert_eq!(
        code(create_volume(&csi, as_block).await),
        Code::AlreadyExists
    );
    // CT-10: a 128-character name.
    let long = format!("{}{}", unique("long"), "x".repeat(128))
        .chars()
        .take(128)
        .collect::<String>();
    let v = create_volume(&csi, create_request(&long)).await.unwrap();
    assert_eq!(v.volume_id, long);
    // A name storch cannot use as is gets a stable derived id.
    let slashed = format!("{}/a", unique("slash"));
    let a = create_volume(&csi, create_request(&slashed)).await.unwrap();
    let b = create_volume(&csi, create_request(&slashed)).await.unwrap();
    assert_eq!(a.volume_id, b.volume_id);
    assert!(a.volume_id.starts_with("csi-"), "{}", a.volume_id);
    // CT-14: deleting twice, and deleting what never was, succeed.
    for id in [
        first.volume_id.as_str(),
        &v.volume_id,
        &a.volume_id,
        &a.volume_id,
        "never-was",
    ] {
        csi.delete(id).await;
    }
    assert_eq!(list_all(&csi).await.len(), before);
}

/// Capabilities choose the protocol, parameters the pools (read like a StorageClass's), and
/// the answer says how to reach the volume; CT-15 validates capabilities against it.
#[tokio::test]
async fn capabilities_and_parameters_place_the_volume() {
    let csi = Csi::start().await;
    let raw = CreateVolumeRequest {
        volume_capabilities: vec![block(Mode::SingleNodeWriter)],
        ..create_request(&unique("raw"))
    };
    let raw = create_volume(&csi, raw).await.unwrap();
    assert_eq!(raw.volume_context["storch.io/backend"], "san");
    assert_eq!(raw.volume_context["storch.io/attachment"], "iscsi");
    let shared = CreateVolumeRequest {
        volume_capabilities: vec![mount(Mode::MultiNodeMultiWriter)],
        ..create_request(&unique("rwx"))
    };
    let shared = create_volume(&csi, shared).await.unwrap();
    assert_eq!(shared.volume_context["storch.io/attachment"], "nfs");
    let hdd = CreateVolumeRequest {
        parameters: params(&[
            ("media", "hdd"),
            ("fsType", "xfs"),
            ("csi.storage.k8s.io/pvc/name", "claim"),
            ("csi.storage.k8s.io/pvc/namespace", "team"),
            ("csi.storage.k8s.io/provisioner-secret-name", "ignored"),
        ]),
        ..create_request(&unique("hdd"))
    };
    let hdd = create_volume(&csi, hdd).await.unwrap();
    assert_eq!(hdd.volume_context["storch.io/backend"], "san");
    assert_eq!(hdd.volume_context["storch.io/fsType"], "xfs");
    let by_pool = CreateVolumeRequest {
        parameters: params(&[("storagePools", "nfs:pool1")]),
        ..create_request(&unique("pool"))
    };
    assert_eq!(
        create_volume(&csi, by_pool).await.unwrap().volume_context["storch.io/backend"],
        "nfs"
    );
    for v in [&raw, &shared, &hdd] {
        assert!(
            v.volume_context
                .keys()
                .all(|k| !k.to_lowercase().contains("secret"))
        );
    }
    // The claim names the request in the audit trail.
    let events = csi
        .get_text(&format!(
            "/trident/v1/events?object=volume/{}",
            hdd.volume_id
        ))
        .await;
    assert!(events.contains("csi:pvc/team/claim/"), "{events}");

    // CT-15.
    let mut c = csi.controller.clone();
    let validate = |id: &str, caps| ValidateVolumeCapabilitiesRequest {
        volume_id: id.to_string(),
        volume_capabilities: caps,
        ..ValidateVolumeCapabilitiesRequest::default()
    };
    let ok = c
        .validate_volume_capabilities(validate(
            &raw.volume_id,
            vec![block(Mode::SingleNodeWriter)],
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(ok.confirmed.is_some(), "{}", ok.message);
    let no = c
        .validate_volume_capabilities(validate(
            &shared.volume_id,
            vec![block(Mode::SingleNodeWriter)],
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(no.confirmed.is_none());
    assert!(
        no.message.contains("volume_capabilities[0]"),
        "{}",
        no.message
    );
    let rwx = c
        .validate_volume_capabilities(validate(
            &raw.volume_id,
            vec![mount(Mode::MultiNodeMultiWriter)],
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(rwx.confirmed.is_none());
    assert_eq!(
        code(
            c.validate_volume_capabilities(validate("nope", vec![mount(Mode::SingleNodeWriter)]))
                .await
        ),
        Code::NotFound
    );
    assert_eq!(
        code(
            c.validate_volume_capabilities(validate("", vec![mount(Mode::SingleNodeWriter)]))
                .await
        ),
        Code::InvalidArgument
    );
    assert_eq!(
        code(
            c.validate_volume_capabilities(validate(&raw.volume_id, vec![]))
                .await
        ),
        Code::InvalidArgument
    );
}

/// SX-7 and CT-3: pages of two, each volume exactly once, the last page without a token;
/// SX-4: the context is the same in CreateVolume, ListVolumes and after a restart.
#[tokio::test]
async fn list_pages_and_contexts_survive_a_restart() {
    let mut csi = Csi::start().await;
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(
            create_volume(&csi, create_request(&unique(&format!("page{i}"))))
                .await
                .unwrap(),
        );
    }
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let r = csi
            .controller
            .clone()
            .list_volumes(ListVolumesRequest {
                max_entries: 2,
                starting_token: token,
            })
            .await
            .unwrap()
            .into_inner();
        assert!(r.entries.len() <= 2);
        seen.extend(r.entries.into_iter().map(|e| e.volume.unwrap()));
        if r.next_token.is_empty() {
            break;
        }
        token = r.next_token;
    }
    let mut expected = created.clone();
    expected.sort_by(|a, b| a.volume_id.cmp(&b.volume_id));
    assert_eq!(seen, expected);
    // Restart on the same data dir and socket.
    csi.restart().await;
    assert_eq!(list_all(&csi).await, expected);
}

/// CT-2 and GetCapacity per parameters and capabilities (from pool free space); CT-26.
#[tokio::test]
async fn capacity_and_expansion() {
    let csi = Csi::start().await;
    let mut c = csi.controller.clone();
    let all = c
        .get_capacity(GetCapacityRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.available_capacity, 2 * (100 << 30));
    let hdd = GetCapacityRequest {
        parameters: params(&[("media", "hdd")]),
        ..GetCapacityRequest::default()
    };
    assert_eq!(
        c.get_capacity(hdd)
            .await
            .unwrap()
            .into_inner()
            .available_capacity,
        100 << 30
    );
    let rwx = GetCapacityRequest {
        volume_capabilities: vec![mount(Mode::MultiNodeMultiWriter)],
        parameters: params(&[("media", "hdd")]),
        ..GetCapacityRequest::default()
    };
    assert_eq!(
        c.get_capacity(rwx)
            .await
            .unwrap()
            .into_inner()
            .available_capacity,
        0
    );

    let nfs = create_volume(
        &csi,
        CreateVolumeRequest {
            capacity_range: range(GIB10, 0),
            parameters: params(&[("media", "ssd")]),
            ..create_request(&unique("grow"))
        },
    )
    .await
    .unwrap();
    let san = create_volume(
        &csi,
        CreateVolumeRequest {
            capacity_range: range(GIB10, 0),
            volume_capabilities: vec![block(Mode::SingleNodeWriter)],
            ..create_request(&unique("growb"))
        },
    )
    .await
    .unwrap();
    let expand = |id: &str, bytes: i64| ControllerExpandVolumeRequest {
        volume_id: id.to_string(),
        capacity_range: range(bytes, 0),
        ..ControllerExpandVolumeRequest::default()
    };
    let grown = c
        .controller_expand_volume(expand(&nfs.volume_id, 2 * GIB10))
        .await
        .unwrap()
        .into_inner();
    assert!(grown.capacity_bytes >= 2 * GIB10);
    assert!(
        !grown.node_expansion_required,
        "an export needs nothing on the node"
    );
    let lun = c
        .controller_expand_volume(expand(&san.volume_id, 2 * GIB10))
        .await
        .unwrap()
        .into_inner();
    assert!(
        lun.node_expansion_required,
        "a LUN needs a rescan and a file system grow"
    );
    // Already large enough: OK, nothing shrinks.
    let same = c
        .controller_expand_volume(expand(&nfs.volume_id, GIB10))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(same.capacity_bytes, grown.capacity_bytes);
    assert_eq!(
        code(c.controller_expand_volume(expand("nope", GIB10)).await),
        Code::NotFound
    );
    assert_eq!(
        code(c.controller_expand_volume(expand("", GIB10)).await),
        Code::InvalidArgument
    );
    let no_range = ControllerExpandVolumeRequest {
        volume_id: nfs.volume_id.clone(),
        ..ControllerExpandVolumeRequest::default()
    };
    assert_eq!(
        code(c.controller_expand_volume(no_range).await),
        Code::InvalidArgument
    );
    let listed = list_all(&csi).await;
    let after = listed
        .iter()
        .find(|v| v.volume_id == nfs.volume_id)
        .unwrap();
    assert_eq!(after.capacity_bytes, grown.capacity_bytes);
    // Metrics by method and outcome.
    let metrics = csi.get_text("/metrics").await;
    for needle in [
        "storch_csi_request_duration_seconds",
        "method=\"ControllerExpandVolume\"",
        "code=\"NOT_FOUND\"",
    ] {
        assert!(metrics.contains(needle), "{needle} in\n{metrics}");
    }
}

/// SX-1: concurrent creates of one name make one volume; each caller gets it or ABORTED.
#[tokio::test]
async fn concurrent_creates_of_one_name_make_one_volume() {
    let csi = Csi::start().await;
    let name = unique("race");
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let mut c = csi.controller.clone();
            let r = create_request(&name);
            tokio::spawn(async move { c.create_volume(r).await })
        })
        .collect();
    let mut ids = Vec::new();
    for call in calls {
        match call.await.unwrap() {
            Ok(r) => ids.push(r.into_inner().volume.unwrap().volume_id),
            Err(s) => assert_eq!(s.code(), Code::Aborted, "{s:?}"),
        }
    }
    // Whoever was aborted retries, as the sidecar does.
    ids.push(
        create_volume(&csi, create_request(&name))
            .await
            .unwrap()
            .volume_id,
    );
    ids.dedup();
    assert_eq!(ids, std::slice::from_ref(&name));
    assert_eq!(list_all(&csi).await.len(), 1);
}

/// A capacity no pool's driver makes is OUT_OF_RANGE (spec: an unsupported capacity), for
/// CreateVolume (placement refuses it) and ControllerExpandVolume (the core refuses it before
/// the array is asked); nothing is recorded either way.
#[tokio::test]
async fn capacities_beyond_the_drivers_limit_are_out_of_range() {
    let mut capped = crate::support::fake_backend(
        "capped",
        "file",
        &[("pool1", serde_json::json!({"media": {"offer": ["ssd"]}}))],
    );
    capped["limitVolumeSize"] = serde_json::json!("10Gi");
    let csi = Csi::start_on(&[], &[capped]).await;
    let mut c = csi.controller.clone();
    let events = || async {
        let text = csi.get_text("/trident/v1/events?limit=100000").await;
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        doc["events"].as_array().unwrap().len()
    };
    // The first create makes the storch class of these parameters; the refusals add nothing.
    let id = csi
        .create(CreateVolumeRequest {
            capacity_range: range(1 << 30, 0),
            ..create_request(&unique("capped"))
        })
        .await;
    let before = events().await;
    let huge = CreateVolumeRequest {
        capacity_range: range(2 * GIB10, 0),
        ..create_request(&unique("huge"))
    };
    let status = create_volume(&csi, huge).await.unwrap_err();
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    assert!(status.message().starts_with("size: "), "{status:?}");
    assert_eq!(events().await, before);
    let expand = |bytes: i64| ControllerExpandVolumeRequest {
        volume_id: id.clone(),
        capacity_range: range(bytes, 0),
        ..ControllerExpandVolumeRequest::default()
    };
    let status = c
        .controller_expand_volume(expand(2 * GIB10))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::OutOfRange, "{status:?}");
    assert!(status.message().contains("too large"), "{status:?}");
    assert_eq!(events().await, before);
    let grown = c
        .controller_expand_volume(expand(GIB10))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(grown.capacity_bytes, GIB10);
}
