//! The hands-on lab of docs/lab.md, kept true: the real `storch-sim ontap` and `storch-sim
//! solidfire` started with the page's flags, the real `storch serve`, and the page's commands
//! run with the files of `examples/` themselves (the backend files pointed at the simulators
//! the way the page's `jq` does it).
//!
//! - The CLI part: the two backends (ONTAP NAS with the CLI, SolidFire over REST), their
//!   pools and offers, the four classes each on exactly one pool, a volume in each class, a
//!   snapshot, a clone, a resize (and a refused shrink) and a delete with their effects on the
//!   arrays, and `explain` naming why bronze went to the Bronze pool.
//! - The Kubernetes part: the lab's StorageClass and PVC YAMLs applied to the fake API server
//!   with `storch serve --kubeconfig`: the StorageClasses take over the classes made over the
//!   CLI, every claim binds to a PV on the expected backend and pool (iSCSI with the CHAP
//!   Secret for SolidFire, NFS for ONTAP), the clone included; a deleted claim's volume leaves
//!   the array before its PV goes, and a deleted StorageClass is a deleted class whose volumes
//!   stay.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use storch::sim::ontap::Array;
use storch::sim::solidfire::Cluster;

use crate::cli::{Out, storch};
use crate::support::fake_kube::{FakeKube, claim_volume_name};
use crate::support::sim_process::SimProcess;
use crate::support::{Server, eventually, get_json};

const ONTAP: &str = "ontapnas_192.0.2.10";
const SOLIDFIRE: &str = "solidfire_192.0.2.21";
const GIB: u64 = 1 << 30;

/// The rows of a volume table, as `storch get volume` (and create, clone, resize) print it.
fn volume_rows(out: Out) -> Vec<Vec<String>> {
    let columns = "NAME|SIZE|STORAGE CLASS|PROTOCOL|BACKEND|POOL|STATE";
    out.ok().table(&columns.split('|').collect::<Vec<_>>())
}

/// The lab's classes and the one pool each must land on.
const CLASSES: [(&str, &str, &str); 4] = [
    ("solidfire-bronze", SOLIDFIRE, "Bronze"),
    ("solidfire-silver", SOLIDFIRE, "Silver"),
    ("solidfire-gold", SOLIDFIRE, "Gold"),
    ("ontap-gold", ONTAP, "aggr1"),
];

fn example(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(rel)
}

fn example_json(rel: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(example(rel)).unwrap()).unwrap()
}

/// The two simulators as docs/lab.md starts them, and `storch serve`.
struct Lab {
    ontap: SimProcess,
    solidfire: SimProcess,
    server: Server,
    client: reqwest::Client,
    _tmp: tempfile::TempDir,
}

impl Lab {
    async fn start(serve_args: &[&str]) -> Lab {
        let tmp = tempfile::tempdir().unwrap();
        let ontap = SimProcess::spawn(tmp.path(), "ontap", &["--svm", "svm0"]);
        let solidfire = SimProcess::spawn(
            tmp.path(),
            "solidfire",
            &["--capacity", "10TiB", "--svip", "192.0.2.21:3260"],
        );
        let server = Server::start_with(&tmp.path().join("data"), serve_args, &[]);
        let client = storch::net::client();
        server.wait_ready(&client).await;
        Lab {
            ontap,
            solidfire,
            server,
            client,
            _tmp: tmp,
        }
    }

    /// `storch --server URL ARGS…` with `stdin`.
    fn run(&self, args: &[&str], stdin: Option<&str>) -> Out {
        let mut all = vec!["--server", self.server.url.as_str()];
        all.extend(args);
        storch(&all, &[], stdin)
    }

    /// `jq --arg ca "$(cat ontap.pem)" '.managementLIF = … | .trustedCACertificate = $ca'
    /// examples/backend-ontap-nas.json`
    fn ontap_backend(&self) -> Value {
        let mut doc = example_json("backend-ontap-nas.json");
        doc["managementLIF"] = json!(self.ontap.addr);
        doc["trustedCACertificate"] = json!(self.ontap.ca_pem());
        doc
    }

    /// `jq --arg ca "$(cat solidfire.pem)" '.Endpoint = … | .trustedCACertificate = $ca'
    /// examples/backend-solidfire.json`
    fn solidfire_backend(&self) -> Value {
        let mut doc = example_json("backend-solidfire.json");
        let endpoint = doc["Endpoint"]
            .as_str()
            .unwrap()
            .replace("@192.0.2.20/", &format!("@{}/", self.solidfire.addr));
        doc["Endpoint"] = json!(endpoint);
        doc["trustedCACertificate"] = json!(self.solidfire.ca_pem());
        doc
    }

    /// The ONTAP backend with the CLI, the SolidFire one over REST, as the page does.
    async fn add_backends(&self) {
        let out = self.run(
            &["create", "backend", "-f", "-"],
            Some(&self.ontap_backend().to_string()),
        );
        let rows = out
            .ok()
            .table(&["NAME", "DRIVER", "STATE", "USER STATE", "VOLUMES"]);
        assert_eq!(rows, [[ONTAP, "ontap-nas", "online", "normal", "0"]]);
        let r = self
            .client
            .post(format!("{}/trident/v1/backend", self.server.url))
            .body(self.solidfire_backend().to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        assert_eq!(
            r.json::<Value>().await.unwrap(),
            json!({"backend": SOLIDFIRE})
        );
    }

    /// `storch create storageclass -f examples/lab/storage-class-CLASS.json` for the four
    /// classes: each gets exactly its one pool.
    fn create_classes(&self) {
        for (class, _, _) in CLASSES {
            let file = example(&format!("lab/storage-class-{class}.json"));
            let rows = self
                .run(&["create", "sc", "-f", file.to_str().unwrap()], None)
                .ok()
                .table(&["NAME", "POOLS"]);
            assert_eq!(rows, [[class, "1"]]);
        }
        let classes = self.run(&["get", "sc", "-o", "json"], None).ok().json();
        for (class, backend, pool) in CLASSES {
            let item = classes["items"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["Config"]["name"] == class)
                .unwrap();
            assert_eq!(item["storage"], json!({backend: [pool]}), "{class}");
        }
    }

    fn sf_volume(&self, name: &str) -> Option<storch::sim::solidfire::state::Volume> {
        let cluster: Cluster = self.solidfire.array();
        cluster.volumes.values().find(|v| v.name == name).cloned()
    }

    fn ontap_volume(&self, name: &str) -> Option<storch::sim::ontap::state::Volume> {
        let array: Array = self.ontap.array();
        array.svms["svm0"].volumes.get(name).cloned()
    }
}

/// (min, max, burst) of a SolidFire volume.
fn qos(v: &storch::sim::solidfire::state::Volume) -> (u64, u64, u64) {
    (v.qos.min, v.qos.max, v.qos.burst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lab_runs_as_docs_lab_md_shows() {
    let lab = Lab::start(&[]).await;
    lab.add_backends().await;
    let rows = lab
        .run(&["get", "backend", "-o", "wide"], None)
        .ok()
        .table(&[
            "NAME",
            "DRIVER",
            "STATE",
            "USER STATE",
            "VOLUMES",
            "PROTOCOL",
            "POOLS",
        ]);
    assert_eq!(
        rows,
        [
            [ONTAP, "ontap-nas", "online", "normal", "0", "file", "2"],
            [
                SOLIDFIRE,
                "solidfire-san",
                "online",
                "normal",
                "0",
                "block",
                "3"
            ]
        ]
    );

    pools_and_offers(&lab);
    classes_and_a_volume_in_each(&lab);
    why_bronze_went_where_it_went(&lab);
    snapshot_clone_resize_delete(&lab);
    let mut lab = lab;
    lab.server.stop();
}

/// docs/lab.md §4: one pool per QoS type, with distinct IOPS ranges; no secret shown.
fn pools_and_offers(lab: &Lab) {
    let rows = lab
        .run(&["get", "pool"], None)
        .ok()
        .table(&["BACKEND", "POOL", "FREE", "OFFERS"]);
    let pools: Vec<(&str, &str, &str)> = rows
        .iter()
        .map(|r| (r[0].as_str(), r[1].as_str(), r[3].as_str()))
        .collect();
    let offers = |pool: &str| pools.iter().find(|p| p.1 == pool).unwrap().2;
    assert_eq!(pools.len(), 5, "{rows:?}");
    for (pool, iops) in [
        ("Bronze", "IOPS=1000-2000"),
        ("Silver", "IOPS=4000-6000"),
        ("Gold", "IOPS=7000-9000"),
    ] {
        assert!(offers(pool).starts_with(iops), "{pool}: {}", offers(pool));
        assert!(offers(pool).contains("backendType=solidfire-san"));
    }
    assert!(offers("aggr1").contains("media=ssd"), "{}", offers("aggr1"));
    assert!(offers("aggr2").contains("media=hdd"), "{}", offers("aggr2"));
    // The secrets stay sealed: neither password nor CHAP secret is shown.
    let shown = lab.run(&["get", "backend", "-o", "json"], None).ok().stdout;
    assert!(!shown.contains("solidfire123") && !shown.contains("netapp123"));
    let cluster: Cluster = lab.solidfire.array();
    let account = cluster.accounts.values().find(|a| a.username == "trident");
    let account = account.expect("the driver created the tenant account");
    assert!(!shown.contains(&account.initiator_secret) && !shown.contains(&account.target_secret));
}

/// docs/lab.md §5 and §6: the classes from the example files, each on exactly one pool, and
/// a volume in each, with its pool's QoS (SolidFire) or as a thin FlexVol on SSD (ONTAP).
fn classes_and_a_volume_in_each(lab: &Lab) {
    lab.create_classes();

    // A volume in each class lands on the class's pool.
    for (class, backend, pool) in CLASSES {
        let name = format!("{}-vol", class.trim_start_matches("solidfire-"));
        let size = if backend == ONTAP { "1Gi" } else { "2Gi" };
        let doc = json!({"name": name, "size": size, "storageClass": class});
        let rows = volume_rows(lab.run(&["create", "volume", "-f", "-"], Some(&doc.to_string())));
        assert_eq!(rows[0][4..6], [backend, pool], "{class}: {rows:?}");
        assert_eq!(rows[0][6], "online");
    }
    // On the arrays: each SolidFire volume has its type's QoS; the ONTAP one is a thin FlexVol
    // on the SSD aggregate.
    for (name, want) in [
        ("bronze-vol", (1000, 2000, 4000)),
        ("silver-vol", (4000, 6000, 8000)),
        ("gold-vol", (7000, 9000, 12000)),
    ] {
        let v = lab.sf_volume(name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!(qos(&v), want, "{name}");
        assert_eq!(v.total_size, 2 * GIB);
    }
    let flexvol = lab.ontap_volume("trident_ontap_gold_vol").unwrap();
    assert_eq!(flexvol.aggregates, ["aggr1"]);
    assert_eq!(flexvol.space_guarantee, "none");
}

/// docs/lab.md §7: `explain` names why every pool but Bronze is no candidate for bronze.
fn why_bronze_went_where_it_went(lab: &Lab) {
    let out = lab
        .run(&["explain", "storageclass", "solidfire-bronze"], None)
        .ok();
    assert!(
        out.stdout
            .starts_with("storage class solidfire-bronze (protocol any): 1 of 5 pools"),
        "{}",
        out.stdout
    );
    let rows = out.table(&["BACKEND", "POOL", "CANDIDATE", "REASONS"]);
    let row = |pool: &str| rows.iter().find(|r| r[1] == pool).unwrap().clone();
    assert_eq!(row("Bronze")[2..], ["yes", ""]);
    assert_eq!(
        row("Silver")[2..],
        ["no", "IOPS: requested 1500, the pool offers [4000, 6000]"]
    );
    assert_eq!(
        row("Gold")[2..],
        ["no", "IOPS: requested 1500, the pool offers [7000, 9000]"]
    );
    for aggr in ["aggr1", "aggr2"] {
        assert_eq!(
            row(aggr)[2..],
            ["no", "IOPS: requested 1500, the pool does not offer it"]
        );
    }
}

/// docs/lab.md §8: a snapshot and a clone of it (the array copies the source's QoS), a
/// resize, and a delete that purges the array volume.
fn snapshot_clone_resize_delete(lab: &Lab) {
    let rows = lab
        .run(&["create", "snapshot", "gold-vol/before-upgrade"], None)
        .ok()
        .table(&["VOLUME", "NAME", "SIZE", "CREATED", "STATE"]);
    assert_eq!(rows[0][..3], ["gold-vol", "before-upgrade", "2 GiB"]);
    let cluster: Cluster = lab.solidfire.array();
    assert!(
        cluster
            .snapshots
            .values()
            .any(|s| s.name == "before-upgrade")
    );
    let rows = volume_rows(lab.run(
        &[
            "create",
            "volume",
            "gold-clone",
            "--clone-from",
            "gold-vol/before-upgrade",
        ],
        None,
    ));
    assert_eq!(
        rows[0][..5],
        ["gold-clone", "2 GiB", "solidfire-gold", "block", SOLIDFIRE]
    );
    let clone = lab.sf_volume("gold-clone").expect("the clone on the array");
    assert_eq!(qos(&clone), (7000, 9000, 12000));
    assert_eq!(clone.status, "active");

    // A resize grows the array volume.
    let rows = volume_rows(lab.run(&["resize", "volume", "silver-vol", "4Gi"], None));
    assert_eq!(rows[0][..2], ["silver-vol", "4 GiB"]);
    assert_eq!(lab.sf_volume("silver-vol").unwrap().total_size, 4 * GIB);
    lab.run(&["resize", "volume", "silver-vol", "1Gi"], None)
        .fails_with("shrinking to 1073741824 is not supported (400 Bad Request)");
    assert_eq!(lab.sf_volume("silver-vol").unwrap().total_size, 4 * GIB);

    // A delete removes the volume from storch and purges it from the array.
    lab.run(&["delete", "volume", "bronze-vol"], None).ok();
    assert!(lab.sf_volume("bronze-vol").is_none(), "deleted and purged");
    let names = lab.run(&["get", "volume", "-o", "name"], None).ok().stdout;
    assert_eq!(
        names, "gold-clone\ngold-vol\nontap-gold-vol\nsilver-vol\n",
        "{names}"
    );
    let cluster: Cluster = lab.solidfire.array();
    let mut on_array: Vec<&str> = cluster.volumes.values().map(|v| v.name.as_str()).collect();
    on_array.sort();
    assert_eq!(on_array, ["gold-clone", "gold-vol", "silver-vol"]);
}

/// A YAML file of `examples/lab/kubernetes/` as `kubectl apply -f` would send it.
fn apply(kube: &FakeKube, file: &str) {
    let text = std::fs::read_to_string(example(&format!("lab/kubernetes/{file}"))).unwrap();
    let doc = storch::yaml::parse(&text).unwrap();
    let resource = match doc["kind"].as_str() {
        Some("StorageClass") => "storageclasses",
        Some("PersistentVolumeClaim") => "persistentvolumeclaims",
        other => panic!("{file}: unexpected kind {other:?}"),
    };
    kube.put(resource, doc);
}

/// Waits until claim `default/NAME` is Bound; returns its PV.
async fn bound_pv(kube: &FakeKube, name: &str) -> Value {
    kube.wait_for(
        |k| {
            k.get("persistentvolumeclaims", Some("default"), name)
                .is_some_and(|p| p["status"]["phase"] == "Bound")
        },
        Duration::from_secs(30),
        &format!("PVC {name} bound"),
    )
    .await;
    let pvc = kube
        .get("persistentvolumeclaims", Some("default"), name)
        .unwrap();
    let pv = pvc["spec"]["volumeName"].as_str().unwrap();
    assert_eq!(pv, claim_volume_name(kube, "default", name));
    kube.get("persistentvolumes", None, pv).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_labs_kubernetes_claims_bind_on_the_expected_backends() {
    let kube = FakeKube::start().await;
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = kube.kubeconfig(dir.path());
    let lab = Lab::start(&["--kubeconfig", kubeconfig.to_str().unwrap()]).await;
    lab.add_backends().await;
    // As on the page: the classes of the CLI part exist; the StorageClasses take them over.
    lab.create_classes();
    for (class, _, _) in CLASSES {
        apply(&kube, &format!("storage-class-{class}.yaml"));
    }
    for (class, _, _) in CLASSES {
        let object = format!("storageclass/{class}");
        eventually(&format!("{class} managed by Kubernetes"), async || {
            let out = lab.run(&["events", "--object", &object], None).ok();
            out.stdout
                .contains(&format!("storage class {class} is managed by kubernetes"))
        })
        .await;
    }
    let claims = [
        (
            "lab-bronze",
            "pvc-solidfire-bronze.yaml",
            SOLIDFIRE,
            "Bronze",
        ),
        (
            "lab-silver",
            "pvc-solidfire-silver.yaml",
            SOLIDFIRE,
            "Silver",
        ),
        ("lab-gold", "pvc-solidfire-gold.yaml", SOLIDFIRE, "Gold"),
        ("lab-ontap", "pvc-ontap-gold.yaml", ONTAP, "aggr1"),
    ];
    for (_, file, _, _) in claims {
        apply(&kube, file);
    }
    let volume = async |pv: &str| {
        let url = format!("{}/trident/v1/volume/{pv}", lab.server.url);
        let (status, body) = get_json(&lab.client, &url).await;
        assert_eq!(status, 200, "{body}");
        body["volume"].clone()
    };
    let chap = "trident-chap-solidfire-192-0-2-21-trident";
    for (claim, _, backend, pool) in claims {
        let pv = bound_pv(&kube, claim).await;
        let name = pv["metadata"]["name"].as_str().unwrap();
        let v = volume(name).await;
        assert_eq!((&v["backend"], &v["pool"]), (&json!(backend), &json!(pool)));
        if backend == SOLIDFIRE {
            let iscsi = &pv["spec"]["iscsi"];
            assert_eq!(iscsi["targetPortal"], "192.0.2.21:3260", "{pv}");
            assert_eq!(iscsi["lun"], 0);
            assert_eq!(iscsi["fsType"], "ext4");
            assert_eq!(iscsi["chapAuthSession"], true);
            assert_eq!(
                iscsi["secretRef"],
                json!({"name": chap, "namespace": "storch"})
            );
            let on_array = lab.sf_volume(v["Config"]["internalName"].as_str().unwrap());
            assert_eq!(on_array.unwrap().total_size, 2 * GIB);
        } else {
            assert_eq!(pv["spec"]["nfs"]["server"], "192.0.2.10", "{pv}");
            let path = format!("/trident_{}", name.replace('-', "_"));
            assert_eq!(pv["spec"]["nfs"]["path"], path.as_str());
            assert!(lab.ontap_volume(&path[1..]).is_some());
            assert_eq!(pv["spec"]["accessModes"], json!(["ReadWriteMany"]));
        }
    }
    let secret = kube
        .get("secrets", Some("storch"), chap)
        .expect("the CHAP Secret");
    assert_eq!(secret["type"], "kubernetes.io/iscsi-chap");
    assert!(secret["data"]["node.session.auth.password"].is_string());

    // The clone: bound to a PV of its own, a copy of lab-gold's volume on the same array.
    apply(&kube, "pvc-solidfire-gold-clone.yaml");
    let pv = bound_pv(&kube, "lab-gold-clone").await;
    let v = volume(pv["metadata"]["name"].as_str().unwrap()).await;
    let source = claim_volume_name(&kube, "default", "lab-gold");
    assert_eq!(v["Config"]["cloneSourceVolume"], source.as_str());
    assert_eq!(v["backend"], SOLIDFIRE);
    let clone = lab
        .sf_volume(v["Config"]["internalName"].as_str().unwrap())
        .expect("the clone on the array");
    assert_eq!(qos(&clone), (7000, 9000, 12000));
    assert!(
        pv["spec"]["iscsi"]["iqn"]
            .as_str()
            .unwrap()
            .contains(v["Config"]["internalName"].as_str().unwrap())
    );

    // A deleted claim releases its PV; with the Delete policy the volume goes, then the PV.
    let silver = claim_volume_name(&kube, "default", "lab-silver");
    kube.remove("persistentvolumeclaims", Some("default"), "lab-silver");
    kube.wait_for(
        |k| k.get("persistentvolumes", None, &silver).is_none(),
        Duration::from_secs(30),
        "lab-silver's PV deleted",
    )
    .await;
    assert!(lab.sf_volume(&silver).is_none(), "purged from the array");
    lab.run(&["get", "volume", &silver], None)
        .fails_with("not found");

    // A StorageClass deleted in Kubernetes is a class deleted in storch; its volumes stay.
    kube.remove("storageclasses", None, "solidfire-bronze");
    eventually("solidfire-bronze deleted", async || {
        let out = lab.run(&["get", "sc", "-o", "name"], None).ok();
        !out.stdout.contains("solidfire-bronze")
    })
    .await;
    let pv = claim_volume_name(&kube, "default", "lab-bronze");
    lab.run(&["get", "volume", &pv], None).ok();
    let mut lab = lab;
    lab.server.stop();
    kube.shutdown().await;
}

/// Section 10 of the page: `storch install --dry-run`, `storch install`, `storch logs -a` and
/// `storch uninstall -a` in the namespace `trident`, with the lab's ONTAP backend file pointed
/// at the simulator binary, on the fake API server (the test plays the kubelet; a `storch
/// serve` child stands for the pod, reached with `--storch-url`, so its token Secret exists
/// before the install).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lab_installs_storch_in_the_cluster_as_docs_lab_md_shows() {
    use crate::install::{Cluster, put_token_secret, storch_in_pod, write_json};
    let c = Cluster::start().await;
    let ontap = SimProcess::spawn(c.dir.path(), "ontap", &["--svm", "svm0"]);
    let mut doc = example_json("backend-ontap-nas.json");
    doc["managementLIF"] = json!(ontap.addr);
    doc["trustedCACertificate"] = json!(ontap.ca_pem());
    let backend = write_json(&c.path("backend-ontap-nas.json"), &doc);
    let class = example("lab/storage-class-ontap-gold.json")
        .display()
        .to_string();
    put_token_secret(&c.kube, "trident");
    let server = storch_in_pod(&c);
    server.wait_ready(&storch::net::client()).await;
    let args = [
        "install",
        "-n",
        "trident",
        "--backend",
        &backend,
        "--storage-class",
        &class,
        "--storch-url",
        &server.url,
    ];
    let mut dry_run = args.to_vec();
    dry_run.push("--dry-run");
    let from = c.kube.requests().len();
    let out = c.run(&dry_run).await.ok();
    println!("{}", out.stdout);
    assert!(out.stdout.contains(&format!("ok      backend {backend}: {ONTAP} (ontap-nas) is reachable from here and initialised, 2 pools")), "{}", out.stdout);
    assert!(
        out.stdout
            .ends_with("dry run completed, no problems found\n"),
        "{}",
        out.stdout
    );
    assert!(c.writes(from).is_empty());

    let logs = [("storch", "storch core is ready\n")];
    let (out, ()) = tokio::join!(c.run(&args), c.play_kubelet("trident", &logs));
    println!("{}", out.stdout);
    let out = out.ok();
    assert!(
        out.stdout
            .contains("storch is installed in namespace trident and ready."),
        "{}",
        out.stdout
    );
    let storch = |args: &[&str]| {
        let mut all = vec![
            "--server",
            server.url.as_str(),
            "--token",
            crate::install::TOKEN,
        ];
        all.extend(args);
        storch(&all, &[], None)
    };
    let backends = storch(&["get", "backend", "-o", "name"]).ok();
    assert_eq!(backends.stdout, format!("{ONTAP}\n"));
    let classes = storch(&["get", "storageclass", "-o", "name"]).ok();
    assert_eq!(classes.stdout, "ontap-gold\n");

    let out = c.run(&["logs", "-n", "trident", "-a"]).await.ok();
    assert!(
        out.stdout.contains("storch core is ready"),
        "{}",
        out.stdout
    );
    let out = c.run(&["uninstall", "-n", "trident", "-a"]).await.ok();
    println!("{}", out.stdout);
    assert!(
        out.stdout
            .contains("deleted PersistentVolumeClaim trident/storch-data"),
        "{}",
        out.stdout
    );
    assert!(c.kube.get("namespaces", None, "trident").is_none());
    assert!(c.kube.list("deployments", None).is_empty());
}
