//! The crash tests' load: volumes created and deleted through the REST API until the server
//! goes away, recording what was acknowledged.

/// What a crash-test load saw acknowledged.
#[derive(Default)]
pub struct Acked {
    /// Volumes whose create was acknowledged (and not deleted since).
    pub live: std::collections::BTreeSet<String>,
    /// Volumes whose delete was acknowledged.
    pub deleted: std::collections::BTreeSet<String>,
}

/// Creates `TAG-0`, `TAG-1`, … of `size` in `class` until the server goes away, deleting an
/// acknowledged volume every third step; records what was acknowledged.
pub async fn load(
    client: reqwest::Client,
    url: String,
    acked: std::sync::Arc<std::sync::Mutex<Acked>>,
    tag: String,
    size: &'static str,
    class: &'static str,
) {
    for i in 0.. {
        let name = format!("{tag}-{i}");
        let body = serde_json::json!({"name": name, "size": size, "storageClass": class});
        match client
            .post(format!("{url}/trident/v1/volume"))
            .json(&body)
            .send()
            .await
        {
            Ok(r) if r.status() == reqwest::StatusCode::CREATED => {
                acked.lock().unwrap().live.insert(name.clone());
            }
            Ok(_) => {}
            Err(_) => return, // the server is gone
        }
        if i % 3 == 2 {
            // A delete in flight when the server dies may or may not happen: the volume leaves
            // `live` before the request is sent, and joins `deleted` only once acknowledged.
            let victim = acked.lock().unwrap().live.pop_first();
            if let Some(v) = victim {
                match client
                    .delete(format!("{url}/trident/v1/volume/{v}"))
                    .send()
                    .await
                {
                    Ok(r) if r.status() == reqwest::StatusCode::OK => {
                        acked.lock().unwrap().deleted.insert(v);
                    }
                    Ok(_) => {}
                    Err(_) => return,
                }
            }
        }
    }
}
