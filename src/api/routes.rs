//! The one table of routes. The router is built from it, and tests check the request
//! classification ([`Op::classify`]) and the OpenAPI document against it, so the three cannot
//! drift apart.

use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{MethodFilter, MethodRouter, on};

use super::AppState;
use super::error::Op;
use super::handlers::{self, backend, drift, events, health, snapshot, storage_class, volume};
use super::ui::handlers as ui;

/// One method on one path.
pub(crate) struct RouteDef {
    pub method: Method,
    /// axum's (and OpenAPI's) template syntax: `/trident/v1/volume/{volume}`.
    pub path: &'static str,
    #[cfg_attr(not(test), allow(dead_code))]
    pub op: Op,
    pub endpoint: MethodRouter<AppState>,
}

fn route<H, T>(method: Method, path: &'static str, op: Op, handler: H) -> RouteDef
where
    H: Handler<T, AppState>,
    T: 'static,
{
    let filter = MethodFilter::try_from(method.clone())
        .unwrap_or_else(|_| panic!("route table: method {method} has no filter"));
    RouteDef {
        method,
        path,
        op,
        endpoint: on(filter, handler),
    }
}

/// Paths answered without a bearer token even when one is configured (probes).
pub(crate) const UNAUTHENTICATED_PATHS: [&str; 2] = ["/livez", "/readyz"];

/// Every route of the API.
pub(crate) fn table() -> Vec<RouteDef> {
    use Method as M;
    vec![
        // Trident 18.07
        route(
            M::GET,
            "/trident/version",
            Op::Version,
            handlers::version_legacy,
        ),
        route(
            M::GET,
            "/trident/v1/version",
            Op::Version,
            handlers::version,
        ),
        route(
            M::GET,
            "/trident/v1/backend",
            Op::ListBackends,
            backend::list,
        ),
        route(M::POST, "/trident/v1/backend", Op::AddBackend, backend::add),
        route(
            M::GET,
            "/trident/v1/backend/{backend}",
            Op::GetBackend,
            backend::get,
        ),
        route(
            M::POST,
            "/trident/v1/backend/{backend}",
            Op::UpdateBackend,
            backend::update,
        ),
        route(
            M::DELETE,
            "/trident/v1/backend/{backend}",
            Op::DeleteBackend,
            backend::delete,
        ),
        route(M::GET, "/trident/v1/volume", Op::ListVolumes, volume::list),
        route(M::POST, "/trident/v1/volume", Op::AddVolume, volume::add),
        route(
            M::GET,
            "/trident/v1/volume/{volume}",
            Op::GetVolume,
            volume::get,
        ),
        route(
            M::DELETE,
            "/trident/v1/volume/{volume}",
            Op::DeleteVolume,
            volume::delete,
        ),
        route(
            M::GET,
            "/trident/v1/storageclass",
            Op::ListStorageClasses,
            storage_class::list,
        ),
        route(
            M::POST,
            "/trident/v1/storageclass",
            Op::AddStorageClass,
            storage_class::add,
        ),
        route(
            M::GET,
            "/trident/v1/storageclass/{storageClass}",
            Op::GetStorageClass,
            storage_class::get,
        ),
        route(
            M::DELETE,
            "/trident/v1/storageclass/{storageClass}",
            Op::DeleteStorageClass,
            storage_class::delete,
        ),
        // storch
        route(
            M::POST,
            "/trident/v1/volume/{volume}/resize",
            Op::ResizeVolume,
            volume::resize,
        ),
        route(
            M::GET,
            "/trident/v1/volume/{volume}/snapshot",
            Op::ListVolumeSnapshots,
            snapshot::list_of_volume,
        ),
        route(
            M::POST,
            "/trident/v1/volume/{volume}/snapshot",
            Op::CreateSnapshot,
            snapshot::create,
        ),
        route(
            M::GET,
            "/trident/v1/volume/{volume}/snapshot/{snapshot}",
            Op::GetSnapshot,
            snapshot::get,
        ),
        route(
            M::DELETE,
            "/trident/v1/volume/{volume}/snapshot/{snapshot}",
            Op::DeleteSnapshot,
            snapshot::delete,
        ),
        route(
            M::GET,
            "/trident/v1/snapshot",
            Op::ListSnapshots,
            snapshot::list_all,
        ),
        route(
            M::GET,
            "/trident/v1/storageclass/{storageClass}/explain",
            Op::ExplainStorageClass,
            storage_class::explain,
        ),
        route(M::GET, "/trident/v1/events", Op::ListEvents, events::list),
        route(
            M::GET,
            "/trident/v1/orphan",
            Op::ListOrphans,
            drift::orphans,
        ),
        route(
            M::POST,
            "/trident/v1/volume/import",
            Op::ImportVolume,
            drift::import,
        ),
        route(
            M::POST,
            "/trident/v1/backend/{backend}/reconcile",
            Op::ReconcileBackend,
            drift::reconcile,
        ),
        route(
            M::POST,
            "/trident/v1/backend/{backend}/state",
            Op::SetBackendState,
            backend::set_state,
        ),
        route(M::GET, "/livez", Op::Livez, health::livez),
        route(M::GET, "/readyz", Op::Readyz, health::readyz),
        route(M::GET, "/metrics", Op::Metrics, health::metrics),
        route(M::GET, "/openapi.json", Op::OpenApi, health::openapi),
        // storch: the dashboard's reads
        route(M::GET, "/storch/v1/overview", Op::UiOverview, ui::overview),
        route(M::GET, "/storch/v1/volumes", Op::UiVolumes, ui::volumes),
        route(
            M::GET,
            "/storch/v1/volumes/{volume}",
            Op::UiVolume,
            ui::volume,
        ),
        route(
            M::GET,
            "/storch/v1/storageclasses",
            Op::UiStorageClasses,
            ui::storage_classes,
        ),
        route(
            M::GET,
            "/storch/v1/log/verify",
            Op::UiVerifyLog,
            ui::verify_log,
        ),
    ]
}

/// Every `(method, path template)` the API serves (HEAD is also answered wherever GET is).
pub fn route_list() -> Vec<(&'static str, &'static str)> {
    table()
        .into_iter()
        .map(|r| (method_name(&r.method), r.path))
        .collect()
}

fn method_name(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        _ => "OTHER",
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// A concrete path for a template: `{volume}` → `volume-x`.
    fn concrete(template: &str) -> String {
        template
            .split('/')
            .map(
                |seg| match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
                    Some(name) => format!("{name}-x"),
                    None => seg.to_string(),
                },
            )
            .collect::<Vec<_>>()
            .join("/")
    }

    #[test]
    fn no_route_is_listed_twice() {
        let mut seen = BTreeSet::new();
        for r in table() {
            assert!(
                seen.insert((r.method.to_string(), r.path)),
                "{} {}",
                r.method,
                r.path
            );
        }
    }

    #[test]
    fn classification_agrees_with_the_table() {
        for r in table() {
            let path = concrete(r.path);
            assert_eq!(Op::classify(&r.method, &path), r.op, "{} {path}", r.method);
            if r.method == Method::GET {
                assert_eq!(Op::classify(&Method::HEAD, &path), r.op, "HEAD {path}");
            }
        }
    }

    #[test]
    fn probes_are_routes() {
        let paths: Vec<&str> = table().iter().map(|r| r.path).collect();
        for p in UNAUTHENTICATED_PATHS {
            assert!(paths.contains(&p), "{p}");
        }
    }
}
