//! The anchor system's persistence pattern as a baseline: the same records written to etcd,
//! one transaction per object change (create-only compare on the key's version), through
//! etcd's JSON gateway (`POST /v3/kv/txn`) with as many concurrent writers as clients.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use serde_json::json;

/// What etcd achieved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EtcdBaseline {
    pub endpoint: String,
    pub records: u64,
    pub records_per_sec: f64,
}

/// Writes `records` records of `record_bytes` bytes, one transaction each, with `writers`
/// concurrent writers, under a fresh key prefix. Errors name the endpoint.
pub async fn txn_per_record(
    endpoint: &str,
    records: u64,
    record_bytes: usize,
    writers: usize,
) -> Result<EtcdBaseline, String> {
    let base = endpoint.trim_end_matches('/').to_string();
    let base = if base.starts_with("http://") || base.starts_with("https://") {
        base
    } else {
        format!("http://{base}")
    };
    let http = crate::api::tls::client();
    let prefix = format!("/storch-bench/{}/", uuid::Uuid::new_v4());
    let value = STANDARD.encode(vec![b'x'; record_bytes]);
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..writers.max(1))
        .map(|_| {
            let (http, base, prefix, value, next) =
                (http.clone(), base.clone(), prefix.clone(), value.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= records {
                        return Ok(());
                    }
                    let key = STANDARD.encode(format!("{prefix}{i:012}"));
                    let body = json!({
                        "compare": [{"key": key, "result": "EQUAL", "target": "VERSION", "version": "0"}],
                        "success": [{"request_put": {"key": key, "value": value}}],
                    });
                    let r = http
                        .post(format!("{base}/v3/kv/txn"))
                        .json(&body)
                        .send()
                        .await
                        .map_err(|e| format!("etcd at {base}: {e}"))?;
                    if !r.status().is_success() {
                        return Err(format!("etcd at {base}: HTTP {}", r.status()));
                    }
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    let elapsed = started.elapsed();
    // Leave nothing behind.
    let from = STANDARD.encode(&prefix);
    let mut end = prefix.clone().into_bytes();
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    let _ = http
        .post(format!("{base}/v3/kv/deleterange"))
        .json(&json!({"key": from, "range_end": STANDARD.encode(end)}))
        .send()
        .await;
    Ok(EtcdBaseline {
        endpoint: base,
        records,
        records_per_sec: records as f64 / elapsed.as_secs_f64().max(1e-9),
    })
}
