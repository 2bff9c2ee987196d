//! The read-only web dashboard at `/ui/`: static assets embedded in the binary (no build step,
//! no CDN, no framework), and the read endpoints its pages call (`/storch/v1/…`, in the route
//! table like every other API route, behind the same bearer token).
//!
//! The assets hold no data, so they are served without the token; the page asks for the
//! token once, keeps it in the tab's `sessionStorage` and sends it as `Authorization: Bearer`
//! on every data call (never in a URL). Without it, or with a wrong one, the page shows the
//! token prompt and nothing else.
//!
//! - `assets/`: `index.html`, `app.js`, `style.css`.
//! - `handlers`: the read endpoints; `query`: their query strings; `dto`: their shapes.

pub(crate) mod dto;
pub(crate) mod handlers;
pub(crate) mod query;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use super::AppState;

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const ASSETS: [Asset; 4] = [
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("assets/index.html"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("assets/app.js"),
    },
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("assets/style.css"),
    },
    Asset {
        name: "favicon.svg",
        content_type: "image/svg+xml",
        body: include_bytes!("assets/favicon.svg"),
    },
];

/// The prefix the dashboard is served under.
pub(crate) const PREFIX: &str = "/ui";

/// Whether `path` is one of the dashboard's static files (served without a token).
pub(crate) fn is_asset_path(path: &str) -> bool {
    path == PREFIX
        || path
            .strip_prefix(PREFIX)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The routes of the static files: `/ui` redirects to `/ui/`, which is `index.html`.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(PREFIX, get(|| async { Redirect::permanent("/ui/") }))
        .route("/ui/", get(|| async { asset("index.html") }))
        .route(
            "/ui/{file}",
            get(|Path(file): Path<String>| async move { asset(&file) }),
        )
}

/// An embedded file, or a plain 404. The page may only load its own scripts and styles
/// (Content-Security-Policy), never be framed, and the browser may not guess types.
fn asset(name: &str) -> Response {
    let Some(asset) = ASSETS.iter().find(|a| a.name == name) else {
        return (StatusCode::NOT_FOUND, "no such dashboard file\n").into_response();
    };
    let mut response = Response::new(axum::body::Body::from(asset.body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; \
             connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asset_paths_are_only_under_the_prefix() {
        assert!(is_asset_path("/ui"));
        assert!(is_asset_path("/ui/"));
        assert!(is_asset_path("/ui/app.js"));
        assert!(!is_asset_path("/uix"));
        assert!(!is_asset_path("/storch/v1/overview"));
        assert!(!is_asset_path("/trident/v1/volume"));
    }

    #[test]
    fn every_asset_is_served_with_its_type_and_unknown_files_are_404() {
        for a in &ASSETS {
            let r = asset(a.name);
            assert_eq!(r.status(), StatusCode::OK, "{}", a.name);
            assert_eq!(r.headers()[header::CONTENT_TYPE], a.content_type);
            assert!(r.headers().contains_key(header::CONTENT_SECURITY_POLICY));
        }
        assert_eq!(asset("secret.key").status(), StatusCode::NOT_FOUND);
        assert_eq!(asset("../Cargo.toml").status(), StatusCode::NOT_FOUND);
    }

    /// The page keeps the token in sessionStorage only and never builds a URL with it.
    #[test]
    fn the_script_keeps_the_token_out_of_urls_and_local_storage() {
        let js = std::str::from_utf8(include_bytes!("assets/app.js")).unwrap();
        assert!(js.contains("sessionStorage"));
        assert!(!js.contains("localStorage"));
        assert!(!js.contains("token=") && !js.contains("access_token"));
        let html = std::str::from_utf8(include_bytes!("assets/index.html")).unwrap();
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "no CDN"
        );
    }
}
