//! `storch install`, `storch uninstall` and `storch logs`, the real binary against the fake
//! Kubernetes API server (`support::fake_kube`: SelfSubjectAccessReviews, server-side apply
//! with its field manager, pod logs). Nothing runs pods there, so the tests play the kubelet:
//! once the install has applied the Deployment they report it ready and add its pod, and a
//! real `storch serve` child stands for storch in the pod, reached with `--storch-url`. The
//! backend files are initialised against the in-process ONTAP simulator.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::cli::{Out, storch};
use crate::support::fake_kube::{FakeKube, Request};
use crate::support::{Server, eventually};

/// The password of the failing backend: it must appear in no output.
const CANARY: &str = "canary-pw-7f3e91d2";
pub(crate) const TOKEN: &str = "install-test-token-0123456789abcdef";

/// A fake cluster with a default StorageClass, and a kubeconfig for it.
pub(crate) struct Cluster {
    pub(crate) kube: FakeKube,
    kubeconfig: PathBuf,
    pub(crate) dir: tempfile::TempDir,
}

impl Cluster {
    pub(crate) async fn start() -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let kube = FakeKube::start().await;
        let kubeconfig = kube.kubeconfig(dir.path());
        kube.put(
            "storageclasses",
            json!({
                "metadata": {"name": "standard",
                             "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                "provisioner": "rancher.io/local-path",
            }),
        );
        Cluster {
            kube,
            kubeconfig,
            dir,
        }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `storch VERB ARGS… --kubeconfig K`, on a blocking thread (the fake serves meanwhile).
    pub(crate) async fn run(&self, args: &[&str]) -> Out {
        let mut argv: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        argv.push("--kubeconfig".into());
        argv.push(self.kubeconfig.display().to_string());
        tokio::task::spawn_blocking(move || {
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            storch(&argv, &[], None)
        })
        .await
        .unwrap()
    }

    /// The requests that changed something (SelfSubjectAccessReviews only ask).
    pub(crate) fn writes(&self, from: usize) -> Vec<Request> {
        self.kube.requests()[from..]
            .iter()
            .filter(|r| r.method != "GET")
            .filter(|r| {
                r.resource.as_deref() != Some("selfsubjectaccessreviews.authorization.k8s.io")
            })
            .cloned()
            .collect()
    }

    /// The kubelet's part: once the workload exists, its pod (with these containers and
    /// logs) runs and is ready.
    pub(crate) async fn play_kubelet(&self, ns: &str, logs: &[(&str, &str)]) {
        self.play_kubelet_for("deployments", ns, logs).await;
    }

    /// [`Cluster::play_kubelet`] for the workload of `resource` (`statefulsets` when
    /// replicated).
    async fn play_kubelet_for(&self, resource: &str, ns: &str, logs: &[(&str, &str)]) {
        eventually("the install to apply the workload", async || {
            self.kube.get(resource, Some(ns), "storch").is_some()
        })
        .await;
        let containers: Vec<Value> = logs
            .iter()
            .map(|(c, _)| json!({"name": c, "image": "x"}))
            .collect();
        self.kube.put(
            "pods",
            json!({
                "metadata": {"name": "storch-6d4f9-abcde", "namespace": ns,
                             "labels": {"app.kubernetes.io/name": "storch", "app.kubernetes.io/instance": "storch"}},
                "spec": {"containers": containers},
                "status": {"phase": "Running"},
            }),
        );
        for (container, text) in logs {
            self.kube.set_log(ns, "storch-6d4f9-abcde", container, text);
        }
        let mut workload = self.kube.get(resource, Some(ns), "storch").unwrap();
        workload["status"] = json!({"replicas": 1, "readyReplicas": 1, "availableReplicas": 1});
        self.kube.put(resource, workload);
    }
}

/// The objects `storch install --generate-yaml` writes for `args`, as (resource, namespace,
/// name) of the fake.
fn expected_objects(args: &[&str]) -> Vec<(String, Option<String>, String)> {
    let dir = tempfile::tempdir().unwrap();
    let mut argv = vec!["install", "--generate-yaml", dir.path().to_str().unwrap()];
    argv.extend(args);
    storch(&argv, &[], None).ok();
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        let doc = storch::yaml::parse(&std::fs::read_to_string(f).unwrap()).unwrap();
        let resource = match doc["kind"].as_str().unwrap() {
            "ClusterRole" => "clusterroles",
            "ClusterRoleBinding" => "clusterrolebindings",
            "Role" => "roles",
            "RoleBinding" => "rolebindings",
            "ServiceAccount" => "serviceaccounts",
            "Service" => "services",
            "Deployment" => "deployments",
            "StatefulSet" => "statefulsets",
            "DaemonSet" => "daemonsets",
            "PersistentVolumeClaim" => "persistentvolumeclaims",
            "Namespace" => "namespaces",
            "CSIDriver" => "csidrivers",
            other => panic!("unexpected kind {other}"),
        };
        out.push((
            resource.to_string(),
            doc["metadata"]["namespace"].as_str().map(String::from),
            doc["metadata"]["name"].as_str().unwrap().to_string(),
        ));
    }
    out
}

pub(crate) fn write_json(path: &Path, doc: &Value) -> String {
    std::fs::write(path, serde_json::to_vec_pretty(doc).unwrap()).unwrap();
    path.display().to_string()
}

/// `storch serve` standing for storch in its pod, with the install's token.
pub(crate) fn storch_in_pod(cluster: &Cluster) -> Server {
    let token = cluster.path("token");
    std::fs::write(&token, TOKEN).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    Server::start_with(
        &cluster.path("data"),
        &["--auth-token-file", token.to_str().unwrap()],
        &[],
    )
}

/// The token Secret an operator made before the install (the install uses it).
pub(crate) fn put_token_secret(kube: &FakeKube, ns: &str) {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(TOKEN);
    kube.put(
        "secrets",
        json!({"metadata": {"name": "storch-token", "namespace": ns}, "data": {"token": b64}}),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_checks_everything_and_writes_nothing() {
    let c = Cluster::start().await;
    let from = c.kube.requests().len();
    let out = c.run(&["install", "-n", "trident", "--dry-run"]).await;
    assert_eq!(out.code, 0, "{out:#?}");
    for line in [
        "ok      the API server at",
        "Kubernetes v1.33.0-storch-fake",
        "ok      you may create and update every object of the install",
        "ok      namespace trident will be created",
        "ok      the data PVC trident/storch-data is free",
        "ok      the data PVC will use StorageClass standard (rancher.io/local-path)",
        "ok      Secret trident/storch-tls will be created",
        "dry run completed, no problems found",
    ] {
        assert!(
            out.stdout.contains(line),
            "{line:?} missing:\n{}",
            out.stdout
        );
    }
    assert!(
        c.writes(from).is_empty(),
        "a dry run wrote: {:?}",
        c.writes(from)
    );
    // Permissions were asked for every kind the install writes.
    let reviews = c.kube.requests()[from..]
        .iter()
        .filter(|r| r.resource.as_deref() == Some("selfsubjectaccessreviews.authorization.k8s.io"))
        .count();
    assert!(reviews >= 2 * 9, "only {reviews} access reviews");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_failing_precheck_says_its_fix_and_nothing_is_written() {
    type Setup = fn(&FakeKube);
    let cases: [(&str, Setup, &[&str], &str, &str); 6] = [
        (
            "an old cluster",
            |k| k.set_version("1", "30"),
            &[],
            "Kubernetes v1.30.0-storch-fake at",
            "storch needs Kubernetes 1.33 or later",
        ),
        (
            "a missing permission",
            |k| k.deny("create", "apps", "deployments", Some("storch")),
            &[],
            "you may not: create deployments.apps in storch",
            "run the install as a cluster administrator",
        ),
        (
            "no default StorageClass",
            |k| {
                k.remove("storageclasses", None, "standard");
            },
            &[],
            "the cluster has no default StorageClass for storch's data PVC",
            "give one with --volume-class CLASS",
        ),
        (
            "a missing --volume-class",
            |_| {},
            &["--volume-class", "fast"],
            "StorageClass fast (for the data PVC) does not exist",
            "give an existing class with --volume-class",
        ),
        (
            "a data PVC that is not the install's",
            |k| {
                k.put(
                    "persistentvolumeclaims",
                    json!({"metadata": {"name": "storch-data", "namespace": "storch"},
                           "spec": {"accessModes": ["ReadWriteOnce"]}}),
                );
            },
            &[],
            "PVC storch/storch-data exists and was not made by storch install",
            "install into another namespace (-n)",
        ),
        (
            "a default class storch provisions itself",
            |k| {
                k.put(
                    "storageclasses",
                    json!({"metadata": {"name": "standard",
                           "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                           "provisioner": "netapp.io/trident"}),
                );
            },
            &[],
            "StorageClass standard is provisioned by storch itself (netapp.io/trident)",
            "give another class with --volume-class",
        ),
    ];
    for (what, setup, extra, problem, fix) in cases {
        let c = Cluster::start().await;
        setup(&c.kube);
        let from = c.kube.requests().len();
        for dry_run in [true, false] {
            let mut args = vec!["install"];
            args.extend(extra);
            if dry_run {
                args.push("--dry-run");
            }
            let out = c.run(&args).await;
            assert_eq!(out.code, 1, "{what}: {out:#?}");
            assert!(
                out.stdout.contains(&format!("FAILED  {problem}")),
                "{what}: {}",
                out.stdout
            );
            assert!(
                out.stdout.contains(&format!("fix: {fix}")),
                "{what}: {}",
                out.stdout
            );
            assert!(
                out.stderr.contains("1 problem found; nothing was written"),
                "{what}: {}",
                out.stderr
            );
        }
        assert!(
            c.writes(from).is_empty(),
            "{what}: wrote {:?}",
            c.writes(from)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_backend_fails_its_check_without_showing_its_password() {
    let c = Cluster::start().await;
    let sim = crate::support::ontap::sim_in(c.dir.path(), Default::default()).await;
    let good = crate::support::ontap::backend(&sim, "ontap-nas", json!({}));
    let good = write_json(&c.path("good.json"), &good);
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let bad = crate::support::ontap::backend(
        &sim,
        "ontap-nas",
        json!({"managementLIF": closed.to_string(), "password": CANARY,
               "backendName": format!("named-{CANARY}")}),
    );
    let bad = write_json(&c.path("bad.json"), &bad);
    let from = c.kube.requests().len();
    let out = c
        .run(&[
            "install",
            "--dry-run",
            "--backend",
            &good,
            "--backend",
            &bad,
            "--storch-url",
            "http://127.0.0.1:1",
        ])
        .await;
    assert_eq!(out.code, 1, "{out:#?}");
    assert!(
        out.stdout.contains(&format!("ok      backend {good}: "))
            && out
                .stdout
                .contains("is reachable from here and initialised"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(
            "FAILED  backend {bad} (ontap-nas) cannot be initialised"
        )),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("fix: check that the array's management address is reachable"),
        "{}",
        out.stdout
    );
    let all = format!("{}{}", out.stdout, out.stderr);
    assert!(!all.contains(CANARY), "the password was printed:\n{all}");
    assert!(c.writes(from).is_empty());
    // Without --storch-url, a backend file cannot be added: said before anything is written.
    let out = c.run(&["install", "--backend", &good]).await;
    assert_eq!(out.code, 1);
    assert!(out.stdout.contains("needs --storch-url"), "{}", out.stdout);
    assert!(c.writes(from).is_empty());
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_logs_a_refused_second_install_and_uninstall() {
    let c = Cluster::start().await;
    let ns = "storch";
    put_token_secret(&c.kube, ns);
    // A user's PV and a claim elsewhere: never touched.
    c.kube.put("persistentvolumes", json!({"metadata": {"name": "users-pv"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "nfs": {"server": "x", "path": "/y"}}}));
    c.kube.put(
        "persistentvolumeclaims",
        json!({"metadata": {"name": "app-data", "namespace": "apps"},
        "spec": {"accessModes": ["ReadWriteOnce"]}}),
    );
    let sim = crate::support::ontap::sim_in(c.dir.path(), Default::default()).await;
    let backend = crate::support::ontap::backend(&sim, "ontap-nas", json!({"backendName": "nas"}));
    let backend = write_json(&c.path("backend.json"), &backend);
    let class = write_json(
        &c.path("class.json"),
        &json!({"version": "1", "name": "basic", "attributes": {"backendType": "ontap-nas"}}),
    );
    let server = storch_in_pod(&c);
    let http = storch::net::client();
    server.wait_ready(&http).await;

    let from = c.kube.requests().len();
    let args = [
        "install",
        "-n",
        ns,
        "--backend",
        &backend,
        "--storage-class",
        &class,
        "--storch-url",
        &server.url,
    ];
    let storch_log = format!(
        "{{\"level\":\"INFO\",\"msg\":\"backend added\",\"password\":\"{CANARY}\"}}\nplain log line with password={CANARY} and the token {TOKEN}\nstorch core is ready\n"
    );
    let logs = [
        ("storch", storch_log.as_str()),
        ("csi-provisioner", "I1202 provisioner started\n"),
    ];
    let install = c.run(&args);
    let kubelet = c.play_kubelet(ns, &logs);
    let (out, ()) = tokio::join!(install, kubelet);
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        out.stdout
            .contains("waiting for Deployment storch/storch: "),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("storch answers ready at"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("storch is installed in namespace storch and ready."),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains(TOKEN), "the token was printed");
    // Every object of the install, applied server-side by its field manager.
    for (resource, namespace, name) in expected_objects(&["-n", ns]) {
        let obj = c
            .kube
            .get(&resource, namespace.as_deref(), &name)
            .unwrap_or_else(|| panic!("{resource} {name} was not applied"));
        let managers: Vec<&Value> = obj["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| &f["manager"])
            .collect();
        assert_eq!(managers, [&json!("storch-install")], "{resource} {name}");
        assert_eq!(
            obj["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "storch-install"
        );
    }
    let applies = c.kube.requests()[from..]
        .iter()
        .filter(|r| r.method == "PATCH")
        .count();
    assert_eq!(applies, expected_objects(&["-n", ns]).len());
    // The TLS Secret was made, the token Secret used as it was.
    let tls = c.kube.get("secrets", Some(ns), "storch-tls").unwrap();
    assert_eq!(tls["type"], "kubernetes.io/tls");
    // The backend and the class are in storch.
    let (code, doc) =
        crate::support::get_json(&http, &format!("{}/trident/v1/backend/nas", server.url)).await;
    assert_eq!(code, 401, "the token is required: {doc}");
    let got = http
        .get(format!("{}/trident/v1/storageclass/basic", server.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), 200);
    let got = http
        .get(format!("{}/trident/v1/backend/nas", server.url))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(got.status(), 200);

    // A second install is refused before anything is written.
    let from = c.kube.requests().len();
    let out = c.run(&["install", "-n", ns]).await;
    assert_eq!(out.code, 1, "{out:#?}");
    assert!(out.stdout.contains("FAILED  storch is already installed in namespace storch (Deployment storch, managed by storch-install)"), "{}", out.stdout);
    assert!(
        out.stdout.contains("storch uninstall -n storch"),
        "{}",
        out.stdout
    );
    assert!(c.writes(from).is_empty());

    // Logs: the storch container, secrets redacted; --all adds the sidecars; --since is sent.
    let out = c.run(&["logs", "-n", ns]).await.ok();
    assert!(
        out.stdout.contains("storch core is ready"),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("provisioner started"),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains(CANARY) && !out.stdout.contains(TOKEN),
        "{}",
        out.stdout
    );
    let out = c
        .run(&["logs", "-n", ns, "--all", "--since", "1h"])
        .await
        .ok();
    assert!(
        out.stdout
            .contains("==> storch/storch-6d4f9-abcde/csi-provisioner <=="),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("provisioner started"));
    assert!(
        c.kube
            .requests()
            .iter()
            .any(|r| r.query.contains("sinceSeconds=3600"))
    );
    // The archive: logs, events, versions; no secret anywhere in it.
    let archive = c.path("support.tar.gz");
    let out = c
        .run(&[
            "logs",
            "-n",
            ns,
            "--all",
            "--archive",
            archive.to_str().unwrap(),
            "--storch-url",
            &server.url,
        ])
        .await
        .ok();
    assert!(out.stdout.contains("secrets redacted"), "{}", out.stdout);
    let unpacked = c.path("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    let tar = std::process::Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(&unpacked)
        .status()
        .unwrap();
    assert!(tar.success(), "tar -xzf refuses the archive");
    let mut files = Vec::new();
    let mut all = String::new();
    for entry in walk(&unpacked) {
        files.push(entry.strip_prefix(&unpacked).unwrap().display().to_string());
        all.push_str(&std::fs::read_to_string(&entry).unwrap());
    }
    files.sort();
    assert_eq!(
        files,
        [
            "kubernetes-events.json",
            "logs/storch/storch-6d4f9-abcde/csi-provisioner.log",
            "logs/storch/storch-6d4f9-abcde/storch.log",
            "storch-events.json",
            "version.json",
        ]
    );
    assert!(
        all.contains("BackendAdded") || all.contains("backend"),
        "no storch events:\n{all}"
    );
    assert!(all.contains("v1.33.0-storch-fake"));
    assert!(
        !all.contains(CANARY),
        "the canary password is in the archive"
    );
    assert!(!all.contains(TOKEN), "the API token is in the archive");
    assert!(
        !all.contains("netapp123"),
        "the backend's password is in the archive"
    );

    // Uninstall keeps the data, is idempotent, and --all takes the data too.
    let out = c.run(&["uninstall", "-n", ns]).await.ok();
    assert!(
        out.stdout.contains("deleted Deployment storch/storch"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("kept PersistentVolumeClaim storch/storch-data"),
        "{}",
        out.stdout
    );
    assert!(c.kube.get("deployments", Some(ns), "storch").is_none());
    assert!(c.kube.get("clusterroles", None, "storch-storch").is_none());
    assert!(
        c.kube
            .get("persistentvolumeclaims", Some(ns), "storch-data")
            .is_some()
    );
    assert!(c.kube.get("namespaces", None, ns).is_some());
    let out = c.run(&["uninstall", "-n", ns]).await.ok();
    assert!(
        out.stdout.contains("nothing of storch install to remove"),
        "{}",
        out.stdout
    );
    // Installing again reuses the kept data PVC.
    let out = c.run(&["install", "-n", ns, "--dry-run"]).await;
    assert!(
        out.stdout.contains(
            "the data PVC storch/storch-data is left from an earlier install and will be reused"
        ),
        "{}",
        out.stdout
    );
    let out = c.run(&["uninstall", "-n", ns, "--all"]).await.ok();
    assert!(
        out.stdout
            .contains("deleted PersistentVolumeClaim storch/storch-data"),
        "{}",
        out.stdout
    );
    assert!(
        c.kube
            .get("persistentvolumeclaims", Some(ns), "storch-data")
            .is_none()
    );
    assert!(c.kube.get("namespaces", None, ns).is_none());
    assert!(c.kube.get("persistentvolumes", None, "users-pv").is_some());
    assert!(
        c.kube
            .get("persistentvolumeclaims", Some("apps"), "app-data")
            .is_some()
    );
    assert!(c.kube.get("storageclasses", None, "standard").is_some());
    drop(server);
    sim.stop().await;
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edited_generated_yaml_installs_with_from_yaml() {
    let c = Cluster::start().await;
    let dir = c.path("manifests");
    let dir_s = dir.to_str().unwrap().to_string();
    let out = c
        .run(&["install", "-n", "edited", "--generate-yaml", &dir_s])
        .await
        .ok();
    assert!(
        out.stdout.contains("deployment-storch.yaml"),
        "{}",
        out.stdout
    );
    // The reviewer lowers the memory limit.
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with("deployment-storch.yaml"))
        .unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("memory: 512Mi"), "{text}");
    std::fs::write(&file, text.replace("memory: 512Mi", "memory: 384Mi")).unwrap();
    // A second --generate-yaml into the same directory is refused.
    let again = c
        .run(&["install", "-n", "edited", "--generate-yaml", &dir_s])
        .await;
    assert_eq!(again.code, 1);
    assert!(
        again.stderr.contains("already holds YAML files"),
        "{}",
        again.stderr
    );
    // Settings belong in the files then.
    let refused = c
        .run(&["install", "-n", "edited", "--from-yaml", &dir_s, "--csi"])
        .await;
    assert_eq!(refused.code, 1);
    assert!(
        refused
            .stderr
            .contains("--from-yaml installs the files as they are"),
        "{}",
        refused.stderr
    );
    // Files of another namespace are refused, naming the file.
    let wrong = c
        .run(&["install", "-n", "other", "--from-yaml", &dir_s, "--dry-run"])
        .await;
    assert_eq!(wrong.code, 1);
    assert!(
        wrong
            .stderr
            .contains("not the install's namespace \"other\""),
        "{}",
        wrong.stderr
    );

    let args = ["install", "-n", "edited", "--from-yaml", &dir_s];
    let logs = [("storch", "ready\n")];
    let install = c.run(&args);
    let kubelet = c.play_kubelet("edited", &logs);
    let (out, ()) = tokio::join!(install, kubelet);
    assert_eq!(out.code, 0, "{out:#?}");
    let d = c.kube.get("deployments", Some("edited"), "storch").unwrap();
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"],
        "384Mi"
    );
    assert!(
        c.kube
            .get("secrets", Some("edited"), "storch-token")
            .is_some()
    );
    assert!(
        c.kube
            .get("secrets", Some("edited"), "storch-tls")
            .is_some()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_install_with_csi_and_its_uninstall() {
    let c = Cluster::start().await;
    let ns = "ha";
    let settings = [
        "-n",
        ns,
        "--etcd-endpoints",
        "http://etcd-0.etcd:2379",
        "--csi",
    ];
    let mut args = vec!["install"];
    args.extend(settings);
    let logs = [("storch", "standby\n")];
    let (out, ()) = tokio::join!(c.run(&args), c.play_kubelet_for("statefulsets", ns, &logs));
    assert_eq!(out.code, 0, "{out:#?}");
    assert!(
        out.stdout.contains("waiting for StatefulSet ha/storch: "),
        "{}",
        out.stdout
    );
    let expected = expected_objects(&settings);
    for (resource, namespace, name) in &expected {
        assert!(
            c.kube.get(resource, namespace.as_deref(), name).is_some(),
            "{resource} {name}"
        );
    }
    assert!(
        c.kube
            .get("daemonsets", Some("ha-csi-node"), "storch-csi-node")
            .is_some()
    );
    assert!(
        c.kube
            .get("secrets", Some(ns), "storch-secrets-key")
            .is_some()
    );
    // The StatefulSet controller's claim, from the claim template: the pod labels only.
    c.kube.put(
        "persistentvolumeclaims",
        json!({"metadata": {"name": "data-storch-0", "namespace": ns,
        "labels": {"app.kubernetes.io/name": "storch", "app.kubernetes.io/instance": "storch"}},
        "spec": {"accessModes": ["ReadWriteOnce"]}}),
    );
    let out = c.run(&["uninstall", "-n", ns]).await.ok();
    assert!(
        out.stdout.contains("deleted StatefulSet ha/storch"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("deleted DaemonSet ha-csi-node/storch-csi-node"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("deleted CSIDriver csi.storch.io"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("kept PersistentVolumeClaim ha/data-storch-0"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("kept Secret ha/storch-secrets-key"),
        "{}",
        out.stdout
    );
    for (resource, namespace, name) in &expected {
        let left = c.kube.get(resource, namespace.as_deref(), name).is_some();
        assert_eq!(left, resource == "namespaces", "{resource} {name}");
    }
    let out = c.run(&["uninstall", "-n", ns, "--all"]).await.ok();
    assert!(
        out.stdout
            .contains("deleted PersistentVolumeClaim ha/data-storch-0"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("deleted Namespace ha-csi-node"),
        "{}",
        out.stdout
    );
    for (resource, namespace, name) in &expected {
        assert!(
            c.kube.get(resource, namespace.as_deref(), name).is_none(),
            "{resource} {name}"
        );
    }
    assert!(
        c.kube
            .get("persistentvolumeclaims", Some(ns), "data-storch-0")
            .is_none()
    );
}
