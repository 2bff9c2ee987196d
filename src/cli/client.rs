//! The REST client of the CLI: where the server is, TLS and token, and one JSON exchange per
//! call with errors worded like tridentctl's.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use crate::net::{CaError, Method, Response, StatusCode, Url};
use serde_json::Value;

use super::client_args::ClientArgs;
use super::error::{CliError, CliResult, RestError};

/// Where the client looks when neither `--server` nor an environment variable says.
pub const DEFAULT_SERVER: &str = "127.0.0.1:8000";

/// How long establishing a connection (TCP and TLS) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest server message quoted in an error when the body is not an API error envelope.
const MAX_QUOTED_BODY: usize = 300;

/// Validated client settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSettings {
    /// `http(s)://HOST:PORT/` (maybe with a path prefix).
    pub server: Url,
    pub token: Option<String>,
    pub ca_cert: Option<PathBuf>,
    pub debug: bool,
}

impl ClientSettings {
    /// The server from `--server` (or `STORCH_SERVER`, which clap reads), then
    /// `TRIDENT_SERVER`, then [`DEFAULT_SERVER`].
    pub fn from_args(args: &ClientArgs) -> CliResult<ClientSettings> {
        let trident_server = std::env::var("TRIDENT_SERVER").ok();
        let raw = [args.server.as_deref(), trident_server.as_deref()]
            .into_iter()
            .flatten()
            .map(str::trim)
            .find(|s| !s.is_empty())
            .unwrap_or(DEFAULT_SERVER);
        Ok(ClientSettings {
            server: parse_server(raw)?,
            token: args.token.clone().filter(|t| !t.is_empty()),
            ca_cert: args.ca_cert.clone(),
            debug: args.debug,
        })
    }
}

/// `HOST:PORT` (http), or an `http://` or `https://` URL.
pub fn parse_server(raw: &str) -> CliResult<Url> {
    let bad = |why: &str| CliError::Settings(format!("invalid server {raw:?}: {why}"));
    let with_scheme = if raw.contains("://") {
        raw.to_string()
    } else {
        format!("http://{raw}")
    };
    let url = Url::parse(&with_scheme).map_err(|e| bad(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("there is no host"));
    }
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        return Err(bad(
            "expected HOST:PORT or a URL without credentials, query or fragment",
        ));
    }
    Ok(url)
}

/// One server, one connection pool.
pub struct RestClient {
    base: Url,
    http: crate::net::Client,
    token: Option<String>,
    debug: bool,
    /// `--ca-cert` was given.
    custom_ca: bool,
}

impl RestClient {
    pub fn new(settings: &ClientSettings) -> CliResult<RestClient> {
        let mut builder = crate::net::client_builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("storch/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = &settings.ca_cert {
            let pem = std::fs::read(path).map_err(|e| {
                CliError::Settings(format!("could not read --ca-cert {}: {e}", path.display()))
            })?;
            let certs = crate::net::trusted_certs(&pem).map_err(|e| {
                let why = match e {
                    CaError::Invalid(e) => e,
                    CaError::Empty => "no PEM certificate in it".into(),
                };
                CliError::Settings(format!("invalid --ca-cert {}: {why}", path.display()))
            })?;
            builder = builder.tls_certs_only(certs);
        }
        let http = builder
            .build()
            .map_err(|e| CliError::Settings(format!("could not set up the HTTP client: {e}")))?;
        Ok(RestClient {
            base: settings.server.clone(),
            http,
            token: settings.token.clone(),
            debug: settings.debug,
            custom_ca: settings.ca_cert.is_some(),
        })
    }

    /// The server as people write it: `http://127.0.0.1:8000`.
    pub fn server(&self) -> &str {
        self.base.as_str().trim_end_matches('/')
    }

    /// `<server>/trident/v1/<segments…>`, each segment percent-encoded.
    pub fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        {
            let mut path = url
                .path_segments_mut()
                .expect("http(s) URLs always have a path");
            path.pop_if_empty()
                .extend(["trident", "v1"])
                .extend(segments);
        }
        url
    }

    /// GET, expecting success and a JSON body.
    pub async fn get(&self, url: Url) -> Result<Value, RestError> {
        self.exchange(Method::GET, url, None).await
    }

    /// POST a JSON body, expecting success and a JSON body.
    pub async fn post(&self, url: Url, body: &Value) -> Result<Value, RestError> {
        self.exchange(Method::POST, url, Some(body)).await
    }

    /// DELETE, expecting success.
    pub async fn delete(&self, url: Url) -> Result<Value, RestError> {
        self.exchange(Method::DELETE, url, None).await
    }

    /// A GET whose body is read by the caller as it arrives (a stream), once the status says
    /// success.
    pub async fn open_stream(&self, url: Url) -> Result<Response, RestError> {
        let response = self.send(Method::GET, url, None).await?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let bytes = response.bytes().await.unwrap_or_default();
        self.trace_response(status, &bytes);
        Err(RestError::Status {
            status,
            message: error_message(&bytes),
        })
    }

    /// Turns a failure while reading a body into a [`RestError`].
    pub fn body_error(&self, url: &Url, e: crate::net::Error) -> RestError {
        RestError::BadResponse {
            url: url.to_string(),
            detail: format!("the response broke off: {}", innermost(&e)),
        }
    }

    async fn exchange(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<Value, RestError> {
        let response = self.send(method, url.clone(), body).await?;
        let status = response.status();
        let bytes = response
            .bytes()
            .await
            .map_err(|e| self.body_error(&url, e))?;
        self.trace_response(status, &bytes);
        if !status.is_success() {
            return Err(RestError::Status {
                status,
                message: error_message(&bytes),
            });
        }
        serde_json::from_slice(&bytes).map_err(|e| RestError::BadResponse {
            url: url.to_string(),
            detail: format!("the body is not JSON ({e})"),
        })
    }

    async fn send(
        &self,
        method: Method,
        url: Url,
        body: Option<&Value>,
    ) -> Result<Response, RestError> {
        if self.debug {
            // Request bodies are not shown: a backend's carries its passwords.
            let _ = writeln!(std::io::stderr(), "> {method} {url}");
        }
        let mut request = self.http.request(method, url);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        request.send().await.map_err(|e| {
            let detail = innermost(&e);
            RestError::Unreachable {
                server: self.server().to_string(),
                detail: match self.hint(&detail) {
                    Some(hint) => format!("{detail} ({hint})"),
                    None => detail,
                },
            }
        })
    }

    /// What to do about the usual TLS mistakes.
    fn hint(&self, detail: &str) -> Option<&'static str> {
        if detail.contains("CaUsedAsEndEntity") {
            Some(
                "the server's certificate is a CA certificate, which TLS clients refuse as a \
                 server's: issue it with basicConstraints CA:FALSE",
            )
        } else if detail.contains("NotValidForName") || detail.contains("not valid for name") {
            Some(
                "the server's certificate does not name this server in its subjectAltName \
                 (clients never use the CN): reissue it with e.g. `-addext \
                 subjectAltName=DNS:localhost,IP:127.0.0.1`, or use a --server name it holds",
            )
        } else if detail.contains("invalid peer certificate") && !self.custom_ca {
            Some("if the server's certificate is from a private CA, pass it with --ca-cert")
        } else if self.base.scheme() == "http"
            && (detail.contains("invalid HTTP version") || detail.contains("connection closed"))
        {
            Some("if the server speaks https, use --server https://HOST:PORT")
        } else {
            None
        }
    }

    fn trace_response(&self, status: StatusCode, body: &[u8]) {
        if self.debug {
            let _ = writeln!(
                std::io::stderr(),
                "< {status}\n{}",
                String::from_utf8_lossy(body).trim_end()
            );
        }
    }
}

/// The server's `error` field, or the start of a body that has none.
fn error_message(body: &[u8]) -> String {
    if let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body)
        && let Some(Value::String(message)) = map.get("error")
        && !message.is_empty()
    {
        return message.clone();
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return "the server gave no reason".to_string();
    }
    match text.char_indices().nth(MAX_QUOTED_BODY) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// The deepest cause: `Connection refused (os error 111)` rather than the HTTP client's wrapper.
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let message = cause.to_string();
    if e.downcast_ref::<crate::net::Error>()
        .is_some_and(crate::net::Error::is_timeout)
    {
        return format!("timed out ({message})");
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers() {
        for (raw, want) in [
            ("127.0.0.1:8000", "http://127.0.0.1:8000/"),
            ("localhost:1", "http://localhost:1/"),
            ("[::1]:8000", "http://[::1]:8000/"),
            ("http://h:80", "http://h/"),
            ("https://h:8443", "https://h:8443/"),
            ("https://h:8443/prefix/", "https://h:8443/prefix/"),
        ] {
            assert_eq!(parse_server(raw).unwrap().as_str(), want, "{raw}");
        }
        for raw in [
            "ftp://h:1",
            "http://",
            "h:notaport",
            "http://u:p@h:1",
            "h:1?x=1",
        ] {
            assert!(parse_server(raw).is_err(), "{raw}");
        }
    }

    #[test]
    fn urls_encode_names() {
        let settings = ClientSettings {
            server: parse_server("https://h:1/p").unwrap(),
            token: None,
            ca_cert: None,
            debug: false,
        };
        let client = RestClient::new(&settings).unwrap();
        assert_eq!(client.server(), "https://h:1/p");
        assert_eq!(
            client.url(&["volume", "a/b?c"]).as_str(),
            "https://h:1/p/trident/v1/volume/a%2Fb%3Fc"
        );
        let settings = ClientSettings {
            server: parse_server("h:1").unwrap(),
            ..settings
        };
        let client = RestClient::new(&settings).unwrap();
        assert_eq!(
            client.url(&["backend"]).as_str(),
            "http://h:1/trident/v1/backend"
        );
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            error_message(br#"{"backend":null,"error":"backend x was not found"}"#),
            "backend x was not found"
        );
        assert_eq!(error_message(b"  \n"), "the server gave no reason");
        assert_eq!(error_message(b"bad gateway\n"), "bad gateway");
        assert_eq!(error_message(br#"{"error":""}"#), r#"{"error":""}"#);
        let long = "x".repeat(1000);
        assert_eq!(
            error_message(long.as_bytes()).chars().count(),
            MAX_QUOTED_BODY + 1
        );
    }

    #[test]
    fn rest_errors_read_like_tridentctl() {
        let e = CliError::rest(
            "could not get backend x",
            RestError::Status {
                status: StatusCode::NOT_FOUND,
                message: "backend x was not found".into(),
            },
        );
        assert_eq!(
            e.to_string(),
            "could not get backend x: backend x was not found (404 Not Found)"
        );
        let e = CliError::rest(
            "could not get backend x",
            RestError::Unreachable {
                server: "http://127.0.0.1:1".into(),
                detail: "Connection refused (os error 111)".into(),
            },
        );
        assert_eq!(
            e.to_string(),
            "cannot reach the storch server at http://127.0.0.1:1: Connection refused (os error 111)"
        );
    }
}
