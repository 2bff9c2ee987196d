//! The Kubernetes side of `storch install`, `storch uninstall` and `storch logs`: the objects
//! of an install ([`manifests`], one source with the Helm chart's defaults) and a small,
//! kind-generic client ([`Cluster`]) for what the verbs ask of the API server — its version,
//! SelfSubjectAccessReviews, server-side apply with the field manager
//! [`manifests::MANAGED_BY`], lists by label, deletes and pod logs. The CLI
//! (`cli::commands::install`) decides what to do with them; nothing here prints.

pub mod manifests;

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, LogParams, Patch, PatchParams, PostParams,
};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Error as KubeClientError};
use serde_json::Value;

use super::{KubeError, KubeSource, client_config};
pub use manifests::{MANAGED_BY, MANAGED_BY_LABEL, Settings};

/// The oldest Kubernetes the chart and storch support (`kubeVersion` of the chart).
pub const MIN_VERSION: (u32, u32) = (1, 33);

/// A kind the verbs read or write: (apiVersion, kind, plural, namespaced).
const KINDS: &[(&str, &str, &str, bool)] = &[
    ("v1", "Namespace", "namespaces", false),
    ("v1", "ServiceAccount", "serviceaccounts", true),
    ("v1", "Secret", "secrets", true),
    ("v1", "Service", "services", true),
    (
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
    ),
    ("v1", "Pod", "pods", true),
    ("v1", "Event", "events", true),
    ("apps/v1", "Deployment", "deployments", true),
    ("apps/v1", "StatefulSet", "statefulsets", true),
    ("apps/v1", "DaemonSet", "daemonsets", true),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    ("rbac.authorization.k8s.io/v1", "Role", "roles", true),
    (
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    ("storage.k8s.io/v1", "StorageClass", "storageclasses", false),
    ("storage.k8s.io/v1", "CSIDriver", "csidrivers", false),
];

/// A kind's REST facts: its group (`""` for core), plural and scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindInfo {
    pub api_version: String,
    pub kind: String,
    pub group: String,
    pub plural: String,
    pub namespaced: bool,
}

/// The kind of `apiVersion`/`kind`, if the verbs know it.
pub fn kind_info(api_version: &str, kind: &str) -> Option<KindInfo> {
    KINDS
        .iter()
        .find(|(a, k, _, _)| *a == api_version && *k == kind)
        .map(|(a, k, plural, namespaced)| KindInfo {
            api_version: a.to_string(),
            kind: k.to_string(),
            group: a.rsplit_once('/').map_or("", |(g, _)| g).to_string(),
            plural: plural.to_string(),
            namespaced: *namespaced,
        })
}

/// The kind of a whole object (its `apiVersion` and `kind`), or why it is not one to install.
pub fn kind_of(obj: &Value) -> Result<KindInfo, String> {
    let api = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    kind_info(api, kind).ok_or_else(|| {
        format!("kind {kind:?} (apiVersion {api:?}) is not one that storch install applies")
    })
}

impl KindInfo {
    fn resource(&self) -> ApiResource {
        let (group, version) = self
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", &self.api_version));
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, version, &self.kind),
            &self.plural,
        )
    }
}

/// A failed call, worded for the user (the API server's own message where it gave one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ClusterError(pub String);

fn api_error(what: &str, e: KubeClientError) -> ClusterError {
    match e {
        KubeClientError::Api(status) => ClusterError(format!(
            "{what}: {} ({} {})",
            status.message, status.code, status.reason
        )),
        other => ClusterError(format!("{what}: {other}")),
    }
}

/// The API server of an install, as its caller reaches it.
#[derive(Clone)]
pub struct Cluster {
    client: Client,
    /// Where it is, for messages.
    pub server: String,
}

impl Cluster {
    /// A client for `source` (a kubeconfig's current context, an API server URL, or the
    /// pod's service account). Builds the client only: nothing is contacted yet.
    pub async fn connect(source: &KubeSource) -> Result<Cluster, KubeError> {
        let (config, _) = client_config(source).await?;
        let server = config.cluster_url.to_string();
        let client = Client::try_from(config).map_err(KubeError::Client)?;
        Ok(Cluster { client, server })
    }

    /// The server's version: (major, minor, gitVersion).
    pub async fn version(&self) -> Result<(u32, u32, String), ClusterError> {
        let info = self.client.apiserver_version().await.map_err(|e| {
            api_error(
                &format!("cannot reach the API server at {}", self.server),
                e,
            )
        })?;
        let number = |s: &str| s.trim_end_matches('+').parse::<u32>().unwrap_or(0);
        Ok((number(&info.major), number(&info.minor), info.git_version))
    }

    /// Whether the caller may `verb` the `resource` of `group` (in `namespace`), by a
    /// SelfSubjectAccessReview.
    pub async fn can_i(
        &self,
        verb: &str,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
    ) -> Result<bool, ClusterError> {
        let review = SelfSubjectAccessReview {
            spec: SelfSubjectAccessReviewSpec {
                resource_attributes: Some(ResourceAttributes {
                    verb: Some(verb.into()),
                    group: Some(group.into()),
                    resource: Some(resource.into()),
                    namespace: namespace.map(String::from),
                    ..ResourceAttributes::default()
                }),
                ..SelfSubjectAccessReviewSpec::default()
            },
            ..SelfSubjectAccessReview::default()
        };
        let api: Api<SelfSubjectAccessReview> = Api::all(self.client.clone());
        let answer = api
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| api_error("cannot check permissions (SelfSubjectAccessReview)", e))?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }

    fn api(&self, kind: &KindInfo, namespace: Option<&str>) -> Api<DynamicObject> {
        let ar = kind.resource();
        match (kind.namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &ar),
            _ => Api::all_with(self.client.clone(), &ar),
        }
    }

    /// The object, or `None` when there is none.
    pub async fn get(
        &self,
        kind: &KindInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, ClusterError> {
        let found = self
            .api(kind, namespace)
            .get_opt(name)
            .await
            .map_err(|e| api_error(&format!("cannot read {} {name}", kind.kind), e))?;
        Ok(found.map(|o| serde_json::to_value(o).expect("objects serialize")))
    }

    /// The objects of a kind (in `namespace`) matching a label selector (`""`: all).
    pub async fn list(
        &self,
        kind: &KindInfo,
        namespace: Option<&str>,
        selector: &str,
    ) -> Result<Vec<Value>, ClusterError> {
        let mut params = ListParams::default();
        if !selector.is_empty() {
            params = params.labels(selector);
        }
        let list = self
            .api(kind, namespace)
            .list(&params)
            .await
            .map_err(|e| api_error(&format!("cannot list {}", kind.plural), e))?;
        Ok(list
            .items
            .into_iter()
            .map(|o| serde_json::to_value(o).expect("objects serialize"))
            .collect())
    }

    /// Server-side apply of a whole object with the field manager [`MANAGED_BY`] (forcing:
    /// the install owns every field it sets).
    pub async fn apply(&self, obj: &Value) -> Result<(), ClusterError> {
        let kind = kind_of(obj).map_err(ClusterError)?;
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let namespace = obj["metadata"]["namespace"].as_str();
        let mut params = PatchParams::apply(MANAGED_BY);
        params.force = true;
        self.api(&kind, namespace)
            .patch(name, &params, &Patch::Apply(obj))
            .await
            .map_err(|e| api_error(&format!("cannot apply {}", manifests::describe(obj)), e))?;
        Ok(())
    }

    /// Creates an object (a Secret made once); an existing one is left as it is (`false`).
    pub async fn create(&self, obj: &Value) -> Result<bool, ClusterError> {
        let kind = kind_of(obj).map_err(ClusterError)?;
        let namespace = obj["metadata"]["namespace"].as_str();
        let typed: DynamicObject = serde_json::from_value(obj.clone())
            .map_err(|e| ClusterError(format!("bad object {}: {e}", manifests::describe(obj))))?;
        match self
            .api(&kind, namespace)
            .create(&PostParams::default(), &typed)
            .await
        {
            Ok(_) => Ok(true),
            Err(KubeClientError::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(api_error(
                &format!("cannot create {}", manifests::describe(obj)),
                e,
            )),
        }
    }

    /// Deletes an object (foreground for workloads: their pods go with them); `false` when it
    /// was not there.
    pub async fn delete(
        &self,
        kind: &KindInfo,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<bool, ClusterError> {
        match self
            .api(kind, namespace)
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(true),
            Err(KubeClientError::Api(s)) if s.code == 404 => Ok(false),
            Err(e) => Err(api_error(&format!("cannot delete {} {name}", kind.kind), e)),
        }
    }

    /// A container's log (`since`: only the lines of that last stretch).
    pub async fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        since: Option<Duration>,
    ) -> Result<String, ClusterError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let params = LogParams {
            container: Some(container.to_string()),
            since_seconds: since.map(|d| d.as_secs().max(1) as i64),
            ..LogParams::default()
        };
        api.logs(pod, &params)
            .await
            .map_err(|e| api_error(&format!("cannot read the log of {pod}/{container}"), e))
    }
}

/// The label selector of the pods of an install.
pub fn pod_selector() -> String {
    format!(
        "app.kubernetes.io/name={},app.kubernetes.io/instance={}",
        manifests::CHART_NAME,
        manifests::RELEASE
    )
}

/// The label selector of what `storch install` made.
pub fn installed_selector() -> String {
    format!(
        "app.kubernetes.io/instance={},{MANAGED_BY_LABEL}={MANAGED_BY}",
        manifests::RELEASE
    )
}
