//! `storch install`, `storch uninstall` and `storch logs`: storch on a Kubernetes cluster
//! without Helm, Trident's `tridentctl install/uninstall/logs` for storch. The objects and the
//! API calls are `k8s::install`'s; this module checks, prints and decides.
//!
//! `install` first runs every pre-check and prints one line each (the API server and its
//! version, the caller's permissions for every object it writes, the namespace, a previous
//! install, the data PVC and its StorageClass, each `--backend` initialised against its array
//! from this machine, each `--storage-class` file), writes nothing when one fails, then
//! applies the objects (server-side apply, field manager `storch-install`), waits until storch
//! is ready and creates the backends and storage classes through storch's API.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine;
use clap::Args;
use serde_json::{Value, json};

use super::client::Ctx;
use crate::cli::archive::Archive;
use crate::cli::client::{ClientSettings, RestClient, parse_server};
use crate::cli::client_args::{ClientArgs, CreateKind, FileArg};
use crate::cli::error::{CliError, CliResult};
use crate::k8s::KubeSource;
use crate::k8s::install::{
    Cluster, KindInfo, MANAGED_BY, MANAGED_BY_LABEL, MIN_VERSION, Settings, installed_selector,
    kind_info, kind_of, manifests, pod_selector,
};

/// Where the cluster is and which namespace: shared by the three verbs.
#[derive(Debug, Clone, Args)]
#[command(group(clap::ArgGroup::new("cluster_source").multiple(false)))]
pub struct ClusterArgs {
    /// storch's namespace.
    #[arg(short = 'n', long, default_value = "storch", value_name = "NS")]
    pub namespace: String,
    /// The cluster of this kubeconfig's current context [default: $KUBECONFIG, else
    /// ~/.kube/config].
    #[arg(long, value_name = "PATH", group = "cluster_source")]
    pub kubeconfig: Option<PathBuf>,
    /// An API server URL without credentials (e.g. `kubectl proxy`'s http://127.0.0.1:8001).
    #[arg(long, value_name = "URL", group = "cluster_source")]
    pub k8s_api_server: Option<String>,
    /// The service account of the pod this runs in.
    #[arg(long, group = "cluster_source")]
    pub in_cluster: bool,
}

#[derive(Debug, Clone, Args)]
pub struct InstallArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// storch's image, REPOSITORY[:TAG] [default: storch:0.1.0].
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,
    /// A backend file (JSON or YAML) to check against its array before installing and to add
    /// once storch runs (repeatable; needs --storch-url).
    #[arg(long = "backend", value_name = "FILE")]
    pub backends: Vec<PathBuf>,
    /// A storage class file to add once storch runs (repeatable; needs --storch-url).
    #[arg(long = "storage-class", value_name = "FILE")]
    pub storage_classes: Vec<PathBuf>,
    /// The size of storch's data PVC (each instance's with --etcd-endpoints) [default: 2Gi].
    #[arg(long, value_name = "SIZE")]
    pub volume_size: Option<String>,
    /// The StorageClass of the data PVC [default: the cluster's default class].
    #[arg(long, value_name = "CLASS")]
    pub volume_class: Option<String>,
    /// etcd members (http://HOST:PORT, comma separated): replicated instances in a
    /// StatefulSet, with a shared secrets key Secret made by the install.
    #[arg(long, value_name = "URLS", value_delimiter = ',')]
    pub etcd_endpoints: Vec<String>,
    /// Also install the CSI driver (csi.storch.io): sidecars, RBAC, CSIDriver and the node
    /// plugin in NS-csi-node.
    #[arg(long)]
    pub csi: bool,
    /// Run the pre-checks only and write nothing (exit 1 when one fails).
    #[arg(long)]
    pub dry_run: bool,
    /// Write the manifests into DIR for review instead of installing (no cluster needed).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["from_yaml", "dry_run"])]
    pub generate_yaml: Option<PathBuf>,
    /// Install the manifests in DIR (as --generate-yaml wrote them, maybe edited) instead of
    /// generating them.
    #[arg(long, value_name = "DIR")]
    pub from_yaml: Option<PathBuf>,
    /// How long to wait for storch to be ready.
    #[arg(long, default_value = "5m", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub timeout: Duration,
    /// Where this machine reaches storch's REST API once it runs (e.g. https://localhost:8443
    /// with `kubectl -n NS port-forward svc/storch 8443:8000`; the install's certificate is
    /// trusted): the install then waits for its
    /// /readyz and adds the --backend and --storage-class files through it.
    #[arg(long, value_name = "URL")]
    pub storch_url: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct UninstallArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Also remove storch's data: the data PVC(s), the secrets key and the namespaces the
    /// install made.
    #[arg(short = 'a', long)]
    pub all: bool,
}

#[derive(Debug, Clone, Args)]
pub struct LogsArgs {
    #[command(flatten)]
    pub cluster: ClusterArgs,
    /// Every replica and container (the CSI sidecars and node plugins too), not only the
    /// storch container of the leader.
    #[arg(short = 'a', long)]
    pub all: bool,
    /// Only the lines of this last stretch (e.g. 1h).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub since: Option<Duration>,
    /// Write a tar.gz for a support case instead: the logs, the namespace's Kubernetes
    /// events, versions and (with --storch-url) storch's event history, secrets redacted.
    #[arg(long, value_name = "FILE")]
    pub archive: Option<PathBuf>,
    /// Where this machine reaches storch's REST API, for its version and events in the
    /// archive (the token is read from the install's Secret).
    #[arg(long, value_name = "URL")]
    pub storch_url: Option<String>,
}

fn runtime() -> CliResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Settings(format!("could not start a runtime: {e}")))
}

fn say(line: &str) {
    let _ = crate::cli::output::emit(&mut std::io::stdout().lock(), &format!("{line}\n"));
}

fn namespace_ok(ns: &str) -> CliResult<()> {
    let valid = !ns.is_empty()
        && ns.len() <= 53
        && ns
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !ns.starts_with('-')
        && !ns.ends_with('-');
    if valid {
        Ok(())
    } else {
        Err(CliError::Usage(format!(
            "--namespace {ns:?}: expected a DNS label of at most 53 characters (lower-case letters, digits and '-')"
        )))
    }
}

impl ClusterArgs {
    fn source(&self) -> CliResult<KubeSource> {
        namespace_ok(&self.namespace)?;
        if self.in_cluster {
            return Ok(KubeSource::InCluster);
        }
        if let Some(url) = &self.k8s_api_server {
            return Ok(KubeSource::ApiServer(url.clone()));
        }
        if let Some(path) = &self.kubeconfig {
            return Ok(KubeSource::Kubeconfig(path.clone()));
        }
        let path = std::env::var_os("KUBECONFIG")
            .map(PathBuf::from)
            .filter(|p| !p.as_os_str().is_empty())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube/config")))
            .filter(|p| p.is_file())
            .ok_or_else(|| {
                CliError::Usage(
                    "no cluster: give --kubeconfig PATH, --k8s-api-server URL or --in-cluster (or set KUBECONFIG)"
                        .into(),
                )
            })?;
        Ok(KubeSource::Kubeconfig(path))
    }

    async fn connect(&self) -> CliResult<Cluster> {
        let source = self.source()?;
        Cluster::connect(&source)
            .await
            .map_err(|e| CliError::Settings(error_chain(&e)))
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

fn kind(api_version: &str, kind: &str) -> KindInfo {
    kind_info(api_version, kind).expect("a kind the install knows")
}

// ---------------------------------------------------------------------------------------------
// install

/// `storch install`.
pub fn install(client: &ClientArgs, args: InstallArgs) -> CliResult<()> {
    let settings = settings(&args)?;
    let objects = match &args.from_yaml {
        Some(dir) => read_yaml_dir(dir, &settings.namespace)?,
        None => manifests::objects(&settings),
    };
    if let Some(dir) = &args.generate_yaml {
        return write_yaml_dir(dir, &objects);
    }
    runtime()?.block_on(install_on_cluster(client, &args, &settings, &objects))
}

fn settings(args: &InstallArgs) -> CliResult<Settings> {
    namespace_ok(&args.cluster.namespace)?;
    let mut s = Settings::new(&args.cluster.namespace);
    if let Some(image) = &args.image {
        s.set_image(image).map_err(CliError::Usage)?;
    }
    if let Some(size) = &args.volume_size {
        crate::model::size::parse_size(size)
            .map_err(|e| CliError::Usage(format!("--volume-size {size:?}: {e}")))?;
        s.volume_size = size.clone();
    }
    if let Some(class) = &args.volume_class {
        if class.is_empty() {
            return Err(CliError::Usage("--volume-class: empty class name".into()));
        }
        s.volume_class = Some(class.clone());
    }
    for e in &args.etcd_endpoints {
        let ok = crate::net::Url::parse(e)
            .is_ok_and(|u| u.scheme() == "http" && u.host_str().is_some_and(|h| !h.is_empty()));
        if !ok {
            return Err(CliError::Usage(format!(
                "--etcd-endpoints {e:?}: expected http://HOST:PORT"
            )));
        }
    }
    s.etcd_endpoints = args.etcd_endpoints.clone();
    s.csi = args.csi;
    if args.from_yaml.is_some()
        && (args.image.is_some()
            || args.volume_size.is_some()
            || args.volume_class.is_some()
            || !args.etcd_endpoints.is_empty()
            || args.csi)
    {
        return Err(CliError::Usage(
            "--from-yaml installs the files as they are: --image, --volume-size, --volume-class, --etcd-endpoints and --csi do not apply (edit the files instead)".into(),
        ));
    }
    if let Some(url) = &args.storch_url {
        parse_server(url)?;
    }
    Ok(s)
}

/// The file name of an object in a `--generate-yaml` directory: the apply order, the kind and
/// the name.
fn file_name(index: usize, obj: &Value) -> String {
    let kind = obj["kind"]
        .as_str()
        .unwrap_or("object")
        .to_ascii_lowercase();
    let name = obj["metadata"]["name"].as_str().unwrap_or("unnamed");
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{index:02}-{kind}-{name}.yaml")
}

fn write_yaml_dir(dir: &Path, objects: &[Value]) -> CliResult<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::Failed(format!("could not create {}: {e}", dir.display())))?;
    let existing = std::fs::read_dir(dir)
        .map_err(|e| CliError::Failed(format!("could not read {}: {e}", dir.display())))?
        .filter_map(Result::ok)
        .any(|e| e.path().extension().is_some_and(|x| x == "yaml"));
    if existing {
        return Err(CliError::Usage(format!(
            "--generate-yaml {}: the directory already holds YAML files; give an empty or new one",
            dir.display()
        )));
    }
    for (i, obj) in objects.iter().enumerate() {
        let path = dir.join(file_name(i, obj));
        let text = format!(
            "# {} for `storch install --from-yaml {}`; storch uninstall finds it by its labels.\n{}",
            manifests::describe(obj),
            dir.display(),
            crate::cli::output::yaml_text(obj)?
        );
        std::fs::write(&path, text)
            .map_err(|e| CliError::Failed(format!("could not write {}: {e}", path.display())))?;
        say(&format!("wrote {}", path.display()));
    }
    say(&format!(
        "{} objects; the Secrets {} and {} (and {} with --etcd-endpoints) are not among them: `storch install --from-yaml {}` makes them when missing",
        objects.len(),
        manifests::TLS_SECRET,
        manifests::TOKEN_SECRET,
        manifests::SECRETS_KEY_SECRET,
        dir.display()
    ));
    Ok(())
}

/// The documents of every `*.yaml` file in `dir` (name order), each a kind the install
/// applies, namespaced ones in `namespace` or the CSI node plugin's.
fn read_yaml_dir(dir: &Path, namespace: &str) -> CliResult<Vec<Value>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| CliError::Input(format!("--from-yaml {}: {e}", dir.display())))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    let mut objects = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file)
            .map_err(|e| CliError::Input(format!("could not read {}: {e}", file.display())))?;
        for (i, chunk) in text.split("\n---").enumerate() {
            let body = chunk.trim_start_matches("---");
            if body
                .lines()
                .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
            {
                continue;
            }
            let what = format!("{} (document {})", file.display(), i + 1);
            let doc = crate::yaml::parse(body)
                .map_err(|e| CliError::Input(format!("could not parse {what}: {e}")))?;
            let info = kind_of(&doc).map_err(|e| CliError::Input(format!("{what}: {e}")))?;
            let ns = doc["metadata"]["namespace"].as_str();
            if doc["metadata"]["name"].as_str().is_none_or(str::is_empty) {
                return Err(CliError::Input(format!("{what}: metadata.name is missing")));
            }
            let csi_ns = format!("{namespace}-csi-node");
            if info.namespaced && ns != Some(namespace) && ns != Some(csi_ns.as_str()) {
                return Err(CliError::Input(format!(
                    "{what}: metadata.namespace is {ns:?}, not the install's namespace {namespace:?} (-n)"
                )));
            }
            objects.push(doc);
        }
    }
    if objects.is_empty() {
        return Err(CliError::Input(format!(
            "--from-yaml {}: no YAML documents in it",
            dir.display()
        )));
    }
    Ok(objects)
}

/// The result of the pre-checks: one line each, and the problems with their fixes.
#[derive(Default)]
struct Checks {
    problems: usize,
}

impl Checks {
    fn ok(&mut self, line: &str) {
        say(&format!("ok      {line}"));
    }

    fn fail(&mut self, line: &str, fix: &str) {
        self.problems += 1;
        say(&format!("FAILED  {line}"));
        say(&format!("        fix: {fix}"));
    }
}

/// Storage class provisioners storch answers: its data PVC must not use one.
const OWN_PROVISIONERS: [&str; 3] = ["netapp.io/trident", "storch.io/storch", "csi.storch.io"];

/// The workload of the objects: (kind, name).
fn workload(objects: &[Value]) -> Option<(String, String)> {
    objects
        .iter()
        .find(|o| matches!(o["kind"].as_str(), Some("Deployment" | "StatefulSet")))
        .map(|o| {
            (
                o["kind"].as_str().unwrap().to_string(),
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
}

async fn install_on_cluster(
    client: &ClientArgs,
    args: &InstallArgs,
    settings: &Settings,
    objects: &[Value],
) -> CliResult<()> {
    let ns = settings.namespace.as_str();
    let cluster = args.cluster.connect().await?;
    let mut checks = Checks::default();
    let replicated = objects.iter().any(|o| o["kind"] == "StatefulSet");
    precheck_cluster(&cluster, ns, objects, replicated, &mut checks).await?;
    let backends = precheck_files(args, &mut checks).await;
    if checks.problems > 0 {
        return Err(CliError::Failed(format!(
            "{} problem{} found; nothing was written",
            checks.problems,
            if checks.problems == 1 { "" } else { "s" }
        )));
    }
    if args.dry_run {
        say("dry run completed, no problems found");
        return Ok(());
    }
    // The namespaces, the Secrets (never printed), then the other objects in order.
    let (namespaces, rest): (Vec<&Value>, Vec<&Value>) =
        objects.iter().partition(|o| o["kind"] == "Namespace");
    for obj in &namespaces {
        apply(&cluster, obj).await?;
    }
    let token = ensure_secrets(&cluster, ns, replicated).await?;
    for obj in rest {
        apply(&cluster, obj).await?;
    }
    let (kind_name, name) = workload(objects).ok_or_else(|| {
        CliError::Failed("the manifests have no Deployment or StatefulSet".into())
    })?;
    let deadline = Instant::now() + args.timeout;
    wait_ready(&cluster, ns, &kind_name, &name, deadline).await?;
    if let Some(url) = &args.storch_url {
        let ctx = storch_client(client, url, &cluster, ns, Some(token.clone())).await?;
        wait_readyz(&ctx, deadline).await?;
        for path in backends {
            say(&format!("adding backend {}", path.display()));
            super::objects::create(&ctx, CreateKind::Backend(FileArg { file: Some(path) })).await?;
        }
        for path in &args.storage_classes {
            say(&format!("adding storage class {}", path.display()));
            super::objects::create(
                &ctx,
                CreateKind::StorageClass(FileArg {
                    file: Some(path.clone()),
                }),
            )
            .await?;
        }
    }
    say(&format!("storch is installed in namespace {ns} and ready."));
    say(&format!(
        "Its API: https://storch.{ns}.svc:8000 in the cluster; from here: kubectl -n {ns} port-forward svc/storch 8443:8000, then storch -s https://localhost:8443 --ca-cert <(kubectl -n {ns} get secret {tls} -o jsonpath='{{.data.tls\\.crt}}' | base64 -d) --token \"$(kubectl -n {ns} get secret {token} -o jsonpath='{{.data.token}}' | base64 -d)\" get backend",
        tls = manifests::TLS_SECRET,
        token = manifests::TOKEN_SECRET
    ));
    say(&format!(
        "Logs: storch logs -n {ns}; remove it: storch uninstall -n {ns} (--all also removes its data)"
    ));
    Ok(())
}

async fn precheck_cluster(
    cluster: &Cluster,
    ns: &str,
    objects: &[Value],
    replicated: bool,
    checks: &mut Checks,
) -> CliResult<()> {
    match cluster.version().await {
        Ok((major, minor, git)) if (major, minor) >= MIN_VERSION => checks.ok(&format!(
            "the API server at {} answers, Kubernetes {git}",
            cluster.server
        )),
        Ok((_, _, git)) => checks.fail(
            &format!("Kubernetes {git} at {} is too old", cluster.server),
            &format!(
                "storch needs Kubernetes {}.{} or later; upgrade the cluster",
                MIN_VERSION.0, MIN_VERSION.1
            ),
        ),
        Err(e) => {
            checks.fail(
                &e.to_string(),
                "check --kubeconfig / --k8s-api-server and that the cluster is up",
            );
            // Nothing else can be checked without the API server.
            return Ok(());
        }
    }
    // Permissions: create and patch (server-side apply) for every kind written, and the
    // Secrets the install reads or makes.
    let mut wanted: Vec<(String, String, Option<String>, &str)> = Vec::new();
    for obj in objects {
        let info = kind_of(obj).map_err(CliError::Input)?;
        let namespace = info.namespaced.then(|| {
            obj["metadata"]["namespace"]
                .as_str()
                .unwrap_or(ns)
                .to_string()
        });
        for verb in ["create", "patch"] {
            let key = (
                info.group.clone(),
                info.plural.clone(),
                namespace.clone(),
                verb,
            );
            if !wanted.contains(&key) {
                wanted.push(key);
            }
        }
    }
    for verb in ["get", "create"] {
        wanted.push((String::new(), "secrets".into(), Some(ns.to_string()), verb));
    }
    let mut denied = Vec::new();
    for (group, resource, namespace, verb) in &wanted {
        let allowed = cluster
            .can_i(verb, group, resource, namespace.as_deref())
            .await
            .map_err(|e| CliError::Failed(e.to_string()))?;
        if !allowed {
            let what = if group.is_empty() {
                resource.clone()
            } else {
                format!("{resource}.{group}")
            };
            denied.push(match namespace {
                Some(n) => format!("{verb} {what} in {n}"),
                None => format!("{verb} {what}"),
            });
        }
    }
    if denied.is_empty() {
        checks.ok(&format!(
            "you may create and update every object of the install ({} checks)",
            wanted.len()
        ));
    } else {
        checks.fail(
            &format!("you may not: {}", denied.join(", ")),
            "run the install as a cluster administrator, or have one grant these permissions",
        );
    }
    let namespace_kind = kind("v1", "Namespace");
    match cluster.get(&namespace_kind, None, ns).await {
        Ok(Some(_)) => checks.ok(&format!("namespace {ns} exists and will be used")),
        Ok(None) => checks.ok(&format!("namespace {ns} will be created")),
        Err(e) => checks.fail(&e.to_string(), "check your access to namespaces"),
    }
    // A previous install, by this tool, by Helm or by kubectl.
    for (api, k) in [("apps/v1", "Deployment"), ("apps/v1", "StatefulSet")] {
        let info = kind(api, k);
        match cluster.get(&info, Some(ns), manifests::RELEASE).await {
            Ok(Some(found)) => {
                let by = found["metadata"]["labels"][MANAGED_BY_LABEL]
                    .as_str()
                    .unwrap_or("kubectl or another tool")
                    .to_string();
                checks.fail(
                    &format!("storch is already installed in namespace {ns} ({k} {}, managed by {by})", manifests::RELEASE),
                    &format!(
                        "to change it: storch install -n {ns} --generate-yaml DIR, then kubectl apply --server-side --field-manager={MANAGED_BY} -f DIR; to start over: storch uninstall -n {ns} (the data PVC stays), then install again"
                    ),
                );
            }
            Ok(None) => {}
            Err(e) => checks.fail(&e.to_string(), "check your access to workloads"),
        }
    }
    // The data PVC: free, or kept from an earlier install by this tool (then reused).
    let pvc_kind = kind("v1", "PersistentVolumeClaim");
    let mut class_wanted: Option<Option<String>> = None;
    for obj in objects {
        let claim = match obj["kind"].as_str() {
            Some("PersistentVolumeClaim") => Some(obj.clone()),
            Some("StatefulSet") => obj["spec"]["volumeClaimTemplates"].get(0).cloned(),
            _ => None,
        };
        let Some(claim) = claim else { continue };
        class_wanted = Some(claim["spec"]["storageClassName"].as_str().map(String::from));
        if obj["kind"] != "PersistentVolumeClaim" {
            continue;
        }
        let name = claim["metadata"]["name"].as_str().unwrap_or_default();
        match cluster.get(&pvc_kind, Some(ns), name).await {
            Ok(Some(found)) if found["metadata"]["labels"][MANAGED_BY_LABEL] == MANAGED_BY => {
                checks.ok(&format!(
                    "the data PVC {ns}/{name} is left from an earlier install and will be reused (its event log is kept)"
                ))
            }
            Ok(Some(_)) => checks.fail(
                &format!("PVC {ns}/{name} exists and was not made by storch install"),
                &format!("install into another namespace (-n), or delete the PVC if its data is not needed (kubectl -n {ns} delete pvc {name})"),
            ),
            Ok(None) => checks.ok(&format!("the data PVC {ns}/{name} is free")),
            Err(e) => checks.fail(&e.to_string(), "check your access to PVCs"),
        }
    }
    if replicated {
        checks.ok(
            "replicated through etcd: each instance gets its own data PVC from the StatefulSet",
        );
    }
    if let Some(class) = class_wanted {
        check_class(cluster, class.as_deref(), checks).await;
    }
    for secret in [manifests::TLS_SECRET, manifests::TOKEN_SECRET]
        .into_iter()
        .chain(replicated.then_some(manifests::SECRETS_KEY_SECRET))
    {
        match cluster.get(&kind("v1", "Secret"), Some(ns), secret).await {
            Ok(Some(_)) => checks.ok(&format!("Secret {ns}/{secret} exists and will be used")),
            Ok(None) => checks.ok(&format!("Secret {ns}/{secret} will be created")),
            Err(e) => checks.fail(&e.to_string(), "check your access to Secrets"),
        }
    }
    Ok(())
}

/// The data PVC's StorageClass: the one named, else the cluster's default; it must exist and
/// not be one storch provisions itself.
async fn check_class(cluster: &Cluster, class: Option<&str>, checks: &mut Checks) {
    let info = kind("storage.k8s.io/v1", "StorageClass");
    let found = match class {
        Some(name) => match cluster.get(&info, None, name).await {
            Ok(Some(c)) => Some(c),
            Ok(None) => {
                checks.fail(
                    &format!("StorageClass {name} (for the data PVC) does not exist"),
                    "give an existing class with --volume-class (kubectl get storageclass)",
                );
                return;
            }
            Err(e) => {
                checks.fail(&e.to_string(), "check your access to StorageClasses");
                return;
            }
        },
        None => match cluster.list(&info, None, "").await {
            Ok(classes) => classes.into_iter().find(|c| {
                c["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"]
                    == "true"
            }),
            Err(e) => {
                checks.fail(&e.to_string(), "check your access to StorageClasses");
                return;
            }
        },
    };
    let Some(found) = found else {
        checks.fail(
            "the cluster has no default StorageClass for storch's data PVC",
            "give one with --volume-class CLASS (and --volume-size SIZE), or mark a class the default",
        );
        return;
    };
    let name = found["metadata"]["name"].as_str().unwrap_or_default();
    let provisioner = found["provisioner"].as_str().unwrap_or_default();
    if OWN_PROVISIONERS.contains(&provisioner) {
        checks.fail(
            &format!("StorageClass {name} is provisioned by storch itself ({provisioner}): storch cannot provision its own data volume"),
            "give another class with --volume-class",
        );
    } else {
        checks.ok(&format!(
            "the data PVC will use StorageClass {name} ({provisioner})"
        ));
    }
}

/// Each `--backend` parsed and initialised against its array from here, each
/// `--storage-class` parsed. Messages never show a secret of the file. Returns the backend
/// files.
async fn precheck_files(args: &InstallArgs, checks: &mut Checks) -> Vec<PathBuf> {
    if (!args.backends.is_empty() || !args.storage_classes.is_empty()) && args.storch_url.is_none()
    {
        checks.fail(
            "--backend and --storage-class are added through storch's API, which needs --storch-url",
            "give --storch-url (e.g. https://localhost:8443 with kubectl port-forward svc/storch 8443:8000), or add them after the install with storch create backend -f FILE",
        );
    }
    for path in &args.backends {
        let shown = path.display();
        let doc = match std::fs::read(path) {
            Ok(bytes) => match crate::api::input::parse_backend_doc(&bytes) {
                Ok(doc) => doc,
                Err(e) => {
                    checks.fail(
                        &format!("backend {shown}: {e}"),
                        "fix the file (JSON or YAML, a Trident backend config)",
                    );
                    continue;
                }
            },
            Err(e) => {
                checks.fail(
                    &format!("backend {shown}: cannot read it: {e}"),
                    "give a readable file",
                );
                continue;
            }
        };
        let secrets = secret_strings(&doc);
        let scrub = |text: String| scrub(&text, &secrets);
        let built = match crate::drivers::build_driver(&doc) {
            Ok(b) => b,
            Err(e) => {
                checks.fail(
                    &format!("backend {shown}: {}", scrub(e.to_string())),
                    "fix the field the message names",
                );
                continue;
            }
        };
        let driver = built.driver.driver_name();
        match tokio::time::timeout(Duration::from_secs(60), built.driver.discover()).await {
            Ok(Ok(found)) => checks.ok(&format!(
                "backend {shown}: {} ({driver}) is reachable from here and initialised, {} pool{}",
                found.backend_name,
                found.pools.len(),
                if found.pools.len() == 1 { "" } else { "s" }
            )),
            Ok(Err(e)) => checks.fail(
                &format!("backend {shown} ({driver}) cannot be initialised: {}", scrub(e.to_string())),
                "check that the array's management address is reachable from this machine (and from the cluster), and the credentials and SVM/pool names in the file",
            ),
            Err(_) => checks.fail(
                &format!("backend {shown} ({driver}): the array did not answer within 60s"),
                "check that the array's management address is reachable from this machine",
            ),
        }
    }
    for path in &args.storage_classes {
        let shown = path.display();
        let parsed = std::fs::read(path)
            .map_err(|e| format!("cannot read it: {e}"))
            .and_then(|b| crate::api::input::parse_backend_doc(&b).map_err(|e| e.to_string()))
            .and_then(crate::model::storage_class::StorageClassConfig::from_value);
        match parsed {
            Ok(class) => checks.ok(&format!("storage class {shown}: {}", class.name)),
            Err(e) => checks.fail(&format!("storage class {shown}: {e}"), "fix the file"),
        }
    }
    args.backends.clone()
}

/// Every secret string of a document (values under secret keys, URL passwords), longest
/// first.
fn secret_strings(doc: &Value) -> Vec<String> {
    fn strings(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Number(n) => out.push(n.to_string()),
            Value::Array(a) => a.iter().for_each(|i| strings(i, out)),
            Value::Object(m) => m.values().for_each(|i| strings(i, out)),
            _ => {}
        }
    }
    let mut copy = doc.clone();
    let mut out = Vec::new();
    for v in crate::secrets::split(&mut copy).into_values() {
        strings(&v, &mut out);
    }
    let halves: Vec<String> = out
        .iter()
        .filter_map(|s| s.split_once(':'))
        .map(|(_, pass)| pass.to_string())
        .collect();
    out.extend(halves);
    out.retain(|s| s.chars().count() >= 4);
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

fn scrub(text: &str, secrets: &[String]) -> String {
    secrets.iter().fold(text.to_string(), |t, s| {
        t.replace(s.as_str(), crate::secrets::REDACTED)
    })
}

fn secret_object(ns: &str, name: &str, kind_type: &str, data: Value) -> Value {
    let mut labels = json!({
        "app.kubernetes.io/name": manifests::CHART_NAME,
        "app.kubernetes.io/instance": manifests::RELEASE,
    });
    labels[MANAGED_BY_LABEL] = json!(MANAGED_BY);
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "type": kind_type,
        "data": data,
    })
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn secret_value(secret: &Value, key: &str) -> Option<Vec<u8>> {
    secret["data"][key]
        .as_str()
        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
}

async fn apply(cluster: &Cluster, obj: &Value) -> CliResult<()> {
    cluster
        .apply(obj)
        .await
        .map_err(|e| CliError::Failed(e.to_string()))?;
    say(&format!("applied {}", manifests::describe(obj)));
    Ok(())
}

/// Makes the TLS, token (and secrets key) Secrets that do not exist yet; returns the API
/// token.
async fn ensure_secrets(cluster: &Cluster, ns: &str, replicated: bool) -> CliResult<String> {
    let failed = |e: crate::k8s::install::ClusterError| CliError::Failed(e.to_string());
    let secret_kind = kind("v1", "Secret");
    if cluster
        .get(&secret_kind, Some(ns), manifests::TLS_SECRET)
        .await
        .map_err(failed)?
        .is_none()
    {
        let names = vec![
            format!("storch.{ns}.svc"),
            format!("storch.{ns}.svc.cluster.local"),
            "localhost".to_string(),
        ];
        let made = rcgen::generate_simple_self_signed(names)
            .map_err(|e| CliError::Failed(format!("could not make a certificate: {e}")))?;
        let obj = secret_object(
            ns,
            manifests::TLS_SECRET,
            "kubernetes.io/tls",
            json!({"tls.crt": b64(made.cert.pem().as_bytes()),
                   "tls.key": b64(made.signing_key.serialize_pem().as_bytes())}),
        );
        cluster.create(&obj).await.map_err(failed)?;
        say(&format!(
            "created Secret {ns}/{} (a self-signed certificate for storch.{ns}.svc)",
            manifests::TLS_SECRET
        ));
    }
    let token = match cluster
        .get(&secret_kind, Some(ns), manifests::TOKEN_SECRET)
        .await
        .map_err(failed)?
    {
        Some(found) => secret_value(&found, "token")
            .map(|b| String::from_utf8_lossy(&b).trim().to_string())
            .filter(|t| t.len() >= 16)
            .ok_or_else(|| {
                CliError::Failed(format!(
                    "Secret {ns}/{} has no usable key \"token\" (at least 16 characters)",
                    manifests::TOKEN_SECRET
                ))
            })?,
        None => {
            let token = b64(&rand::random::<[u8; 32]>());
            let obj = secret_object(
                ns,
                manifests::TOKEN_SECRET,
                "Opaque",
                json!({"token": b64(token.as_bytes())}),
            );
            cluster.create(&obj).await.map_err(failed)?;
            say(&format!(
                "created Secret {ns}/{} (the API token)",
                manifests::TOKEN_SECRET
            ));
            token
        }
    };
    if replicated
        && cluster
            .get(&secret_kind, Some(ns), manifests::SECRETS_KEY_SECRET)
            .await
            .map_err(failed)?
            .is_none()
    {
        let obj = secret_object(
            ns,
            manifests::SECRETS_KEY_SECRET,
            "Opaque",
            json!({"secret.key": b64(&rand::random::<[u8; 32]>())}),
        );
        cluster.create(&obj).await.map_err(failed)?;
        say(&format!(
            "created Secret {ns}/{} (the secrets key every instance shares; storch uninstall keeps it without --all)",
            manifests::SECRETS_KEY_SECRET
        ));
    }
    Ok(token)
}

/// Waits until the workload reports a ready replica, printing its progress when it changes.
async fn wait_ready(
    cluster: &Cluster,
    ns: &str,
    kind_name: &str,
    name: &str,
    deadline: Instant,
) -> CliResult<()> {
    let info = kind("apps/v1", kind_name);
    let mut last = String::new();
    loop {
        let found = cluster
            .get(&info, Some(ns), name)
            .await
            .map_err(|e| CliError::Failed(e.to_string()))?;
        let status = found
            .as_ref()
            .map(|f| f["status"].clone())
            .unwrap_or(Value::Null);
        let ready = status["readyReplicas"].as_u64().unwrap_or(0);
        let wanted = found
            .as_ref()
            .and_then(|f| f["spec"]["replicas"].as_u64())
            .unwrap_or(1);
        let line = format!("waiting for {kind_name} {ns}/{name}: {ready}/{wanted} ready");
        if line != last {
            say(&line);
            last = line;
        }
        if ready >= 1 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(CliError::Failed(format!(
                "{kind_name} {ns}/{name} has no ready replica after the --timeout; see kubectl -n {ns} describe pods -l {} and storch logs -n {ns}",
                pod_selector()
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A REST client for storch at `url`: the install's token, and for https its certificate
/// (the TLS Secret's) as the only one trusted.
async fn storch_client(
    client: &ClientArgs,
    url: &str,
    cluster: &Cluster,
    ns: &str,
    token: Option<String>,
) -> CliResult<Ctx> {
    let server = parse_server(url)?;
    let secret_kind = kind("v1", "Secret");
    let token = match token {
        Some(t) => Some(t),
        None => cluster
            .get(&secret_kind, Some(ns), manifests::TOKEN_SECRET)
            .await
            .ok()
            .flatten()
            .and_then(|s| secret_value(&s, "token"))
            .map(|b| String::from_utf8_lossy(&b).trim().to_string()),
    };
    let mut ca_file = None;
    if server.scheme() == "https" && client.ca_cert.is_none() {
        let cert = cluster
            .get(&secret_kind, Some(ns), manifests::TLS_SECRET)
            .await
            .ok()
            .flatten()
            .and_then(|s| secret_value(&s, "tls.crt"));
        if let Some(pem) = cert {
            let path =
                std::env::temp_dir().join(format!("storch-install-{}.crt", std::process::id()));
            std::fs::write(&path, pem).map_err(|e| {
                CliError::Failed(format!("could not write {}: {e}", path.display()))
            })?;
            ca_file = Some(path);
        }
    }
    let settings = ClientSettings {
        server,
        token,
        ca_cert: ca_file.clone().or_else(|| client.ca_cert.clone()),
        debug: client.debug,
    };
    let rest = RestClient::new(&settings);
    if let Some(path) = ca_file {
        let _ = std::fs::remove_file(path);
    }
    Ok(Ctx {
        rest: rest?,
        format: client.output,
    })
}

async fn wait_readyz(ctx: &Ctx, deadline: Instant) -> CliResult<()> {
    let mut url = ctx.rest.url(&[]);
    url.set_path("/readyz");
    let mut last = String::new();
    loop {
        let line = match ctx.rest.get(url.clone()).await {
            Ok(_) => {
                say(&format!("storch answers ready at {}", ctx.rest.server()));
                return Ok(());
            }
            Err(e) => format!("waiting for storch at {}: {e}", ctx.rest.server()),
        };
        if line != last {
            say(&line);
            last = line;
        }
        if Instant::now() >= deadline {
            return Err(CliError::Failed(format!(
                "storch did not answer ready at {} within the --timeout",
                ctx.rest.server()
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// uninstall

/// What uninstall removes, in order: workloads before what they use, cluster-wide objects
/// named for this namespace, and (with --all) the data.
const REMOVE_ORDER: [(&str, &str); 13] = [
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("v1", "Service"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("v1", "ServiceAccount"),
    ("storage.k8s.io/v1", "CSIDriver"),
    ("v1", "Secret"),
    ("v1", "PersistentVolumeClaim"),
    ("v1", "Namespace"),
];

/// `storch uninstall`.
pub fn uninstall(args: UninstallArgs) -> CliResult<()> {
    runtime()?.block_on(async {
        let ns = args.cluster.namespace.as_str();
        let cluster = args.cluster.connect().await?;
        let failed = |e: crate::k8s::install::ClusterError| CliError::Failed(e.to_string());
        cluster.version().await.map_err(failed)?;
        let csi_ns = format!("{ns}-csi-node");
        let cluster_prefix = format!("{}-{ns}", manifests::RELEASE);
        let mut removed = 0;
        let mut kept = Vec::new();
        for (api, k) in REMOVE_ORDER {
            let info = kind(api, k);
            let mut found = Vec::new();
            if info.namespaced {
                for n in [ns, csi_ns.as_str()] {
                    found.extend(cluster.list(&info, Some(n), &installed_selector()).await.map_err(failed)?);
                }
            } else {
                found = cluster.list(&info, None, &installed_selector()).await.map_err(failed)?;
                // Cluster-wide objects of this namespace's install only.
                found.retain(|o| {
                    let name = o["metadata"]["name"].as_str().unwrap_or_default();
                    match k {
                        "ClusterRole" | "ClusterRoleBinding" => {
                            name == cluster_prefix || name.starts_with(&format!("{cluster_prefix}-csi-"))
                        }
                        "Namespace" => name == ns || name == csi_ns,
                        _ => true,
                    }
                });
            }
            if k == "PersistentVolumeClaim" {
                // The StatefulSet's claims carry the pod labels, not the install's.
                let claims = cluster.list(&info, Some(ns), &pod_selector()).await.map_err(failed)?;
                for c in claims {
                    let name = c["metadata"]["name"].as_str().unwrap_or_default();
                    if name.starts_with(&format!("data-{}-", manifests::RELEASE))
                        && !found.iter().any(|f| f["metadata"]["name"] == name)
                    {
                        found.push(c);
                    }
                }
            }
            for obj in found {
                let name = obj["metadata"]["name"].as_str().unwrap_or_default().to_string();
                let namespace = obj["metadata"]["namespace"].as_str().map(String::from);
                let data = k == "PersistentVolumeClaim"
                    || (k == "Secret" && name == manifests::SECRETS_KEY_SECRET);
                if (data || k == "Namespace") && !args.all {
                    kept.push(manifests::describe(&obj));
                    continue;
                }
                if k == "Namespace" {
                    let others = cluster
                        .list(&kind("v1", "PersistentVolumeClaim"), Some(&name), "")
                        .await
                        .map_err(failed)?;
                    if !others.is_empty() {
                        say(&format!(
                            "kept Namespace {name}: it holds PVCs that storch install did not make"
                        ));
                        continue;
                    }
                }
                if cluster.delete(&info, namespace.as_deref(), &name).await.map_err(failed)? {
                    removed += 1;
                    say(&format!("deleted {}", manifests::describe(&obj)));
                }
            }
        }
        for k in &kept {
            say(&format!("kept {k} (storch's data; --all removes it)"));
        }
        if removed == 0 {
            say(&format!("nothing of storch install to remove in namespace {ns}"));
        } else {
            say(&format!(
                "storch is uninstalled from namespace {ns}; volumes on the arrays and the PVs of users were not touched"
            ));
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------
// logs

/// `storch logs`.
pub fn logs(client: &ClientArgs, args: LogsArgs) -> CliResult<()> {
    runtime()?.block_on(async {
        let ns = args.cluster.namespace.as_str();
        let cluster = args.cluster.connect().await?;
        let failed = |e: crate::k8s::install::ClusterError| CliError::Failed(e.to_string());
        let pod_kind = kind("v1", "Pod");
        let mut pods = cluster.list(&pod_kind, Some(ns), &pod_selector()).await.map_err(failed)?;
        if args.all {
            let csi_ns = format!("{ns}-csi-node");
            pods.extend(cluster.list(&pod_kind, Some(&csi_ns), &pod_selector()).await.map_err(failed)?);
        } else {
            // The leader when replicated, else the one pod; never a CSI node plugin.
            pods.retain(|p| p["metadata"]["labels"]["app.kubernetes.io/component"].is_null());
            pods.sort_by_key(|p| {
                (
                    p["metadata"]["labels"][crate::k8s::ROLE_LABEL] != "leader",
                    p["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                )
            });
            pods.truncate(1);
        }
        if pods.is_empty() {
            return Err(CliError::Failed(format!(
                "no storch pod in namespace {ns} (is storch installed there? storch install -n {ns})"
            )));
        }
        let secrets = namespace_secrets(&cluster, ns).await;
        let mut logs = Vec::new();
        for pod in &pods {
            let name = pod["metadata"]["name"].as_str().unwrap_or_default();
            let pod_ns = pod["metadata"]["namespace"].as_str().unwrap_or(ns);
            let containers: Vec<String> = pod["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["name"].as_str().map(String::from))
                .filter(|c| args.all || c == "storch")
                .collect();
            for container in containers {
                let text = match cluster.pod_log(pod_ns, name, &container, args.since).await {
                    Ok(t) => t,
                    Err(e) => format!("(no log: {e})\n"),
                };
                logs.push((format!("{pod_ns}/{name}/{container}"), redact_text(&text, &secrets)));
            }
        }
        let Some(path) = &args.archive else {
            let mut out = String::new();
            for (what, text) in &logs {
                if logs.len() > 1 {
                    out.push_str(&format!("==> {what} <==\n"));
                }
                out.push_str(text);
                if !text.ends_with('\n') && !text.is_empty() {
                    out.push('\n');
                }
            }
            return crate::cli::output::emit(&mut std::io::stdout().lock(), &out).map(|_| ());
        };
        let mut archive = Archive::default();
        for (what, text) in &logs {
            archive.add(&format!("logs/{what}.log"), text.as_bytes());
        }
        let mut versions = json!({"client": env!("CARGO_PKG_VERSION")});
        match cluster.version().await {
            Ok((_, _, git)) => versions["kubernetes"] = json!(git),
            Err(e) => versions["kubernetes"] = json!(format!("unknown: {e}")),
        }
        let events = cluster
            .list(&kind("v1", "Event"), Some(ns), "")
            .await
            .unwrap_or_default();
        archive.add(
            "kubernetes-events.json",
            crate::cli::output::json_text(&redact_value(&json!({ "items": events }), &secrets)),
        );
        if let Some(url) = &args.storch_url {
            let ctx = storch_client(client, url, &cluster, ns, None).await?;
            match ctx.rest.get(ctx.rest.url(&["version"])).await {
                Ok(v) => versions["storch"] = v,
                Err(e) => versions["storch"] = json!(format!("unknown: {e}")),
            }
            let history = match ctx.rest.get(ctx.rest.url(&["events"])).await {
                Ok(doc) => doc,
                Err(e) => json!({"error": format!("could not get storch's events: {e}")}),
            };
            archive.add(
                "storch-events.json",
                crate::cli::output::json_text(&redact_value(&history, &secrets)),
            );
        } else {
            archive.add(
                "storch-events.json",
                "{\"note\": \"not collected: give --storch-url to include storch's event history\"}\n",
            );
        }
        archive.add("version.json", crate::cli::output::json_text(&versions));
        let mtime = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        archive
            .to_tar_gz(mtime)
            .and_then(|bytes| std::fs::write(path, bytes))
            .map_err(|e| CliError::Failed(format!("could not write {}: {e}", path.display())))?;
        say(&format!(
            "wrote {} ({} log{}, events and versions; secrets redacted)",
            path.display(),
            logs.len(),
            if logs.len() == 1 { "" } else { "s" }
        ));
        Ok(())
    })
}

/// The values of every Secret in the namespace (the API token, CHAP secrets, the TLS key),
/// longest first: cut out of whatever goes into logs and archives. Empty when they cannot be
/// read.
async fn namespace_secrets(cluster: &Cluster, ns: &str) -> Vec<String> {
    let mut out = Vec::new();
    for s in cluster
        .list(&kind("v1", "Secret"), Some(ns), "")
        .await
        .unwrap_or_default()
    {
        if let Some(data) = s["data"].as_object() {
            for v in data.values() {
                if let Some(bytes) = v
                    .as_str()
                    .and_then(|v| base64::engine::general_purpose::STANDARD.decode(v).ok())
                {
                    let text = String::from_utf8_lossy(&bytes).trim().to_string();
                    if text.chars().count() >= 4 {
                        out.push(text);
                    }
                }
            }
        }
    }
    out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    out.dedup();
    out
}

/// A log with secrets cut out: the namespace's Secret values, values under secret-looking
/// keys of JSON lines, and `key=value` / `key: value` of such keys in text lines.
fn redact_text(text: &str, secrets: &[String]) -> String {
    let pattern = regex::Regex::new(
        r#"(?i)((?:password|passphrase|secret|token|privatekey|chap[a-z]*secret)[a-z_]*"?\s*[=:]\s*)("[^"]*"|[^\s,}]+)"#,
    )
    .expect("a valid pattern");
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let redacted = match serde_json::from_str::<Value>(body) {
            Ok(v @ Value::Object(_)) => {
                serde_json::to_string(&redact_value(&v, secrets)).unwrap_or_default()
            }
            _ => pattern
                .replace_all(body, format!("${{1}}{}", crate::secrets::REDACTED))
                .into_owned(),
        };
        out.push_str(&scrub(&redacted, secrets));
        if line.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// A JSON document with values under secret-looking keys replaced, and the given secret
/// strings cut out of every other string.
fn redact_value(v: &Value, secrets: &[String]) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let v = if crate::secrets::is_secret_key(k) && !v.is_null() && !v.is_boolean() {
                        json!(crate::secrets::REDACTED)
                    } else {
                        redact_value(v, secrets)
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|i| redact_value(i, secrets)).collect()),
        Value::String(s) => Value::String(scrub(&redact_text_plain(s), secrets)),
        other => other.clone(),
    }
}

fn redact_text_plain(s: &str) -> String {
    if s.contains('\n') || s.contains('=') || s.contains(':') {
        redact_text(s, &[])
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_lose_their_secrets() {
        let text = "{\"level\":\"info\",\"password\":\"hunter22\",\"msg\":\"login\"}\nplain password=hunter22 next\nchapInitiatorSecret: s3cr3t!! done\nthe token abcdEFGH1234 leaked\n";
        let out = redact_text(text, &["abcdEFGH1234".to_string()]);
        assert!(!out.contains("hunter22"), "{out}");
        assert!(!out.contains("s3cr3t!!"), "{out}");
        assert!(!out.contains("abcdEFGH1234"), "{out}");
        assert!(out.contains("\"msg\":\"login\""), "{out}");
        assert!(out.contains("next"), "{out}");
        assert_eq!(out.lines().count(), 4);
    }

    #[test]
    fn file_names_keep_the_apply_order() {
        let obj = json!({"kind": "ClusterRoleBinding", "metadata": {"name": "storch-ns"}});
        assert_eq!(file_name(7, &obj), "07-clusterrolebinding-storch-ns.yaml");
    }
}
