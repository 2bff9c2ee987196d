//! A small client for etcd's v3 API through its JSON gateway (`POST /v3/…`, keys and values in
//! base64, 64-bit integers as strings). It covers what replication needs: leases, ranges,
//! transactions and a watch used as a wake-up. No protobuf toolchain is needed to build it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

/// How long one request may take before the endpoint counts as unreachable.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EtcdError {
    /// No endpoint answered (the call may or may not have taken effect).
    #[error("etcd is unreachable: {0}")]
    Unreachable(String),
    /// etcd answered with an error.
    #[error("etcd refused the request: {0}")]
    Refused(String),
}

/// A key-value pair as etcd stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kv {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
}

/// A range answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    pub kvs: Vec<Kv>,
    pub more: bool,
    /// The store revision the answer was read at.
    pub revision: i64,
}

/// A transaction answer.
#[derive(Debug, Clone, PartialEq)]
pub struct TxnResult {
    pub succeeded: bool,
    pub revision: i64,
    /// The raw responses of whichever branch ran.
    pub responses: Vec<Value>,
}

/// One comparison of a transaction.
#[derive(Debug, Clone)]
pub enum Compare {
    /// The key's create revision (0 when the key does not exist).
    CreateRevision(Vec<u8>, i64),
}

/// One operation of a transaction.
#[derive(Debug, Clone)]
pub enum Op {
    Put {
        key: Vec<u8>,
        value: Vec<u8>,
        lease: Option<i64>,
    },
    Get(Vec<u8>),
    /// Deletes the keys in `[key, range_end)`.
    Delete {
        key: Vec<u8>,
        range_end: Vec<u8>,
    },
}

/// The client. Endpoints are tried in turn; the one that last answered is tried first.
#[derive(Debug)]
pub struct Etcd {
    http: reqwest::Client,
    endpoints: Vec<String>,
    current: AtomicUsize,
}

fn b64(bytes: &[u8]) -> String {
    STANDARD.encode(bytes)
}

/// An int64 of the gateway's JSON (a string, or a number; absent means 0).
fn int(v: &Value) -> i64 {
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        Value::Number(n) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

fn bytes(v: &Value, what: &str) -> Result<Vec<u8>, EtcdError> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::String(s) => STANDARD
            .decode(s)
            .map_err(|e| EtcdError::Refused(format!("etcd sent a {what} that is not base64: {e}"))),
        other => Err(EtcdError::Refused(format!(
            "etcd sent a {what} that is not a string: {other}"
        ))),
    }
}

fn kv(v: &Value) -> Result<Kv, EtcdError> {
    Ok(Kv {
        key: bytes(&v["key"], "key")?,
        value: bytes(&v["value"], "value")?,
        create_revision: int(&v["create_revision"]),
        mod_revision: int(&v["mod_revision"]),
    })
}

/// The end of the range of every key starting with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

impl Op {
    fn json(&self) -> Value {
        match self {
            Op::Put { key, value, lease } => {
                let mut put = json!({"key": b64(key), "value": b64(value)});
                if let Some(lease) = lease {
                    put["lease"] = json!(lease.to_string());
                }
                json!({"request_put": put})
            }
            Op::Get(key) => json!({"request_range": {"key": b64(key)}}),
            Op::Delete { key, range_end } => json!({"request_delete_range": {
                "key": b64(key), "range_end": b64(range_end),
            }}),
        }
    }
}

impl Compare {
    fn json(&self) -> Value {
        match self {
            Compare::CreateRevision(key, rev) => json!({
                "key": b64(key), "target": "CREATE", "result": "EQUAL",
                "create_revision": rev.to_string(),
            }),
        }
    }
}

/// Checks and normalises endpoints: `http://HOST:PORT` or `https://…` (a bare `HOST:PORT`
/// means http). Errors name the endpoint that is malformed.
pub fn parse_endpoints(endpoints: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for e in endpoints {
        let e = e.trim().trim_end_matches('/');
        if e.is_empty() {
            continue;
        }
        let url = if e.contains("://") {
            e.to_string()
        } else {
            format!("http://{e}")
        };
        let parsed = reqwest::Url::parse(&url)
            .map_err(|err| format!("etcd endpoint `{e}` is not a URL: {err}"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(format!(
                "etcd endpoint `{e}` must be http://HOST:PORT or https://HOST:PORT"
            ));
        }
        out.push(url);
    }
    if out.is_empty() {
        return Err("no etcd endpoint given".into());
    }
    Ok(out)
}

impl Etcd {
    /// A client for `endpoints` (see [`parse_endpoints`]).
    pub fn new(endpoints: &[String]) -> Result<Etcd, String> {
        let out = parse_endpoints(endpoints)?;
        let http = crate::net::client_builder()
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|e| format!("cannot build the etcd HTTP client: {e}"))?;
        Ok(Etcd {
            http,
            endpoints: out,
            current: AtomicUsize::new(0),
        })
    }

    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// One gateway call, trying each endpoint once (starting with the last good one).
    async fn call(&self, path: &str, body: &Value) -> Result<Value, EtcdError> {
        let start = self.current.load(Ordering::Relaxed);
        let mut last = String::new();
        for i in 0..self.endpoints.len() {
            let idx = (start + i) % self.endpoints.len();
            let base = &self.endpoints[idx];
            let sent = self
                .http
                .post(format!("{base}{path}"))
                .json(body)
                .send()
                .await;
            let resp = match sent {
                Ok(r) => r,
                Err(e) => {
                    last = format!("{base}: {e}");
                    continue;
                }
            };
            let status = resp.status();
            let text = match resp.text().await {
                Ok(t) => t,
                Err(e) => {
                    last = format!("{base}: {e}");
                    continue;
                }
            };
            self.current.store(idx, Ordering::Relaxed);
            let value: Value = serde_json::from_str(&text).map_err(|e| {
                EtcdError::Refused(format!("{base}{path} answered non-JSON ({e}): {text:.200}"))
            })?;
            if !status.is_success() || value.get("error").is_some() {
                let msg = value["message"]
                    .as_str()
                    .or_else(|| value["error"].as_str())
                    .unwrap_or(&text);
                // An unavailable cluster (no leader, stopping) is worth another endpoint.
                if status.as_u16() == 503 || int(&value["code"]) == 14 {
                    last = format!("{base}: {msg}");
                    continue;
                }
                return Err(EtcdError::Refused(format!("{base}{path}: {msg}")));
            }
            return Ok(value);
        }
        Err(EtcdError::Unreachable(last))
    }

    /// Grants a lease of `ttl` seconds; returns its id.
    pub async fn grant(&self, ttl: i64) -> Result<i64, EtcdError> {
        let v = self
            .call("/v3/lease/grant", &json!({"TTL": ttl.to_string()}))
            .await?;
        match int(&v["ID"]) {
            0 => Err(EtcdError::Refused(format!("lease grant gave no id: {v}"))),
            id => Ok(id),
        }
    }

    /// Renews a lease; returns its remaining TTL in seconds (0: the lease has expired).
    pub async fn keepalive(&self, id: i64) -> Result<i64, EtcdError> {
        let v = self
            .call("/v3/lease/keepalive", &json!({"ID": id.to_string()}))
            .await?;
        Ok(int(&v["result"]["TTL"]))
    }

    /// Revokes a lease (and deletes the keys attached to it).
    pub async fn revoke(&self, id: i64) -> Result<(), EtcdError> {
        self.call("/v3/lease/revoke", &json!({"ID": id.to_string()}))
            .await
            .map(|_| ())
    }

    /// Keys in `[key, range_end)` (`range_end` empty: `key` alone), in key order, at most
    /// `limit` (0: all).
    pub async fn range(
        &self,
        key: &[u8],
        range_end: &[u8],
        limit: i64,
        descending: bool,
    ) -> Result<Range, EtcdError> {
        let mut body = json!({"key": b64(key), "limit": limit.to_string()});
        if !range_end.is_empty() {
            body["range_end"] = json!(b64(range_end));
        }
        if descending {
            body["sort_order"] = json!("DESCEND");
            body["sort_target"] = json!("KEY");
        }
        let v = self.call("/v3/kv/range", &body).await?;
        let kvs = match v["kvs"].as_array() {
            Some(a) => a.iter().map(kv).collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        Ok(Range {
            kvs,
            more: v["more"].as_bool().unwrap_or(false),
            revision: int(&v["header"]["revision"]),
        })
    }

    /// Deletes the keys in `[key, range_end)`; returns how many there were.
    pub async fn delete_range(&self, key: &[u8], range_end: &[u8]) -> Result<i64, EtcdError> {
        let v = self
            .call(
                "/v3/kv/deleterange",
                &json!({"key": b64(key), "range_end": b64(range_end)}),
            )
            .await?;
        Ok(int(&v["deleted"]))
    }

    /// Compacts etcd's history: every revision before `revision` is dropped (keys deleted
    /// or overwritten before it stop taking space once the backend reuses their pages).
    pub async fn compact(&self, revision: i64) -> Result<(), EtcdError> {
        self.call(
            "/v3/kv/compaction",
            &json!({"revision": revision.to_string()}),
        )
        .await
        .map(|_| ())
    }

    /// One key, if it exists.
    pub async fn get(&self, key: &[u8]) -> Result<Option<Kv>, EtcdError> {
        Ok(self.range(key, &[], 1, false).await?.kvs.into_iter().next())
    }

    /// A transaction: if every comparison holds, `success` runs, else `failure`.
    pub async fn txn(
        &self,
        compare: &[Compare],
        success: &[Op],
        failure: &[Op],
    ) -> Result<TxnResult, EtcdError> {
        let body = json!({
            "compare": compare.iter().map(Compare::json).collect::<Vec<_>>(),
            "success": success.iter().map(Op::json).collect::<Vec<_>>(),
            "failure": failure.iter().map(Op::json).collect::<Vec<_>>(),
        });
        let v = self.call("/v3/kv/txn", &body).await?;
        Ok(TxnResult {
            succeeded: v["succeeded"].as_bool().unwrap_or(false),
            revision: int(&v["header"]["revision"]),
            responses: v["responses"].as_array().cloned().unwrap_or_default(),
        })
    }

    /// The key-value pairs a transaction's `Get` returned, in order.
    pub fn txn_kvs(response: &Value) -> Result<Vec<Kv>, EtcdError> {
        match response["response_range"]["kvs"].as_array() {
            Some(a) => a.iter().map(kv).collect(),
            None => Ok(Vec::new()),
        }
    }

    /// Waits until a key in `[key, range_end)` changes after `revision`, or `timeout` passes
    /// (returns whether a change was seen). A watch through the gateway, used as a wake-up:
    /// callers re-read what changed.
    pub async fn wait_for_change(
        &self,
        key: &[u8],
        range_end: &[u8],
        revision: i64,
        timeout: Duration,
    ) -> Result<bool, EtcdError> {
        let idx = self.current.load(Ordering::Relaxed) % self.endpoints.len();
        let base = &self.endpoints[idx];
        let body = json!({"create_request": {
            "key": b64(key), "range_end": b64(range_end),
            "start_revision": (revision + 1).to_string(),
        }});
        let watch = async {
            let mut resp = self
                .http
                .post(format!("{base}/v3/watch"))
                .timeout(timeout + REQUEST_TIMEOUT)
                .json(&body)
                .send()
                .await
                .map_err(|e| EtcdError::Unreachable(format!("{base}: {e}")))?;
            let mut buf = Vec::new();
            loop {
                let Some(chunk) = resp
                    .chunk()
                    .await
                    .map_err(|e| EtcdError::Unreachable(format!("{base}: {e}")))?
                else {
                    return Ok(false);
                };
                buf.extend_from_slice(&chunk);
                // Messages are JSON objects one per line; any with events is the change.
                while let Some(end) = buf.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=end).collect();
                    let msg: Value = serde_json::from_slice(&line).unwrap_or(Value::Null);
                    if msg["result"]["events"]
                        .as_array()
                        .is_some_and(|e| !e.is_empty())
                        || msg["result"]["canceled"].as_bool() == Some(true)
                        || msg.get("error").is_some()
                    {
                        return Ok(true);
                    }
                }
            }
        };
        match tokio::time::timeout(timeout, watch).await {
            Ok(r) => r,
            Err(_) => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_next_key() {
        assert_eq!(prefix_end(b"/storch/log/"), b"/storch/log0".to_vec());
        assert_eq!(prefix_end(&[b'a', 0xFF]), b"b".to_vec());
        assert_eq!(prefix_end(&[0xFF]), vec![0]);
    }

    #[test]
    fn gateway_integers_are_strings_or_numbers() {
        assert_eq!(int(&json!("42")), 42);
        assert_eq!(int(&json!(7)), 7);
        assert_eq!(int(&Value::Null), 0);
    }

    #[test]
    fn endpoints_are_checked() {
        assert!(Etcd::new(&["127.0.0.1:2379".into()]).is_ok());
        let e = Etcd::new(&["ftp://x".into()]).unwrap_err();
        assert!(e.contains("ftp://x"), "{e}");
        assert!(Etcd::new(&[]).is_err());
    }
}
