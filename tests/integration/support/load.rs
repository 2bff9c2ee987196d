//! The crash tests' load: volumes created and deleted through the REST API until the server
//! goes away, recording what was acknowledged.

/// What a crash-test load saw acknowledged.
#[derive(Default)]
pub struct Acked {
    /// Volumes whose create was acknowledged (and not deleted since).
    pub live: std::collections::BTreeSet<String>,
    /// Volumes whose delete was acknowledged.
    pub deleted: std::collections::BTreeSet<String>,
    /// Creates acknowledged so far (a crash round waits for one before it kills).
    pub creates: u64,
    /// Acknowledged volumes destroyed on the array behind storch's back between rounds
    /// ([`super::crash::CrashLoop::drift`]); the load leaves them alone. Storch must show them
    /// `missing`, never delete them.
    pub gone: std::collections::BTreeSet<String>,
    /// Acknowledged volumes grown on the array behind storch's back: name → the array's new
    /// size in bytes, which storch must take.
    pub grown: std::collections::BTreeMap<String, u64>,
}

/// Creates `TAG-0`, `TAG-1`, … of `size` in `class` until the server goes away, deleting an
/// acknowledged volume (never the last one) every third step; records what was acknowledged.
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
                let mut acked = acked.lock().unwrap();
                acked.live.insert(name.clone());
                acked.creates += 1;
            }
            Ok(_) => {}
            Err(_) => return, // the server is gone
        }
        if i % 3 == 2 {
            // A delete in flight when the server dies may or may not happen: the volume leaves
            // `live` before the request is sent, and joins `deleted` only once acknowledged.
            // One acknowledged volume is always left: a slow or full array fails creates
            // while deletes go on, and a load that deleted all it made would check nothing.
            let victim = {
                let mut acked = acked.lock().unwrap();
                if acked.live.len() > 1 {
                    acked.live.pop_first()
                } else {
                    None
                }
            };
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

/// After a crash test's last start of `server`: waits until every volume it lists is online
/// (reconciliation finished the interrupted creates and deletes), or `missing` for those
/// destroyed on the array behind storch's back, then checks that each volume is listed once,
/// that every acknowledged create is there and no acknowledged delete is. Returns the volumes
/// listed and what the load saw acknowledged.
pub async fn check_acknowledged(
    client: &reqwest::Client,
    server: &super::Server,
    acked: &std::sync::Mutex<Acked>,
) -> (std::collections::BTreeSet<String>, Acked) {
    let url = format!("{}/trident/v1/volume", server.url);
    let mut names: Vec<String> = Vec::new();
    let gone = acked.lock().unwrap().gone.clone();
    let settled = |n: &str| {
        if gone.contains(n) {
            "missing"
        } else {
            "online"
        }
    };
    super::eventually("every volume online (or missing)", async || {
        let (_, list) = super::get_json(client, &url).await;
        names = serde_json::from_value(list["volumes"].clone()).unwrap_or_default();
        for n in &names {
            let (_, v) = super::get_json(client, &format!("{url}/{n}")).await;
            if v["volume"]["state"] != settled(n) {
                return false;
            }
        }
        true
    })
    .await;
    let known: std::collections::BTreeSet<String> = names.iter().cloned().collect();
    assert_eq!(known.len(), names.len(), "every volume is listed once");
    let acked = std::mem::take(&mut *acked.lock().unwrap());
    assert!(
        acked.creates > 0,
        "the load made no volumes at all; log:\n{}",
        server.log()
    );
    for v in &acked.live {
        assert!(known.contains(v), "acknowledged volume {v} is lost");
    }
    for v in &acked.deleted {
        assert!(!known.contains(v), "acknowledged delete of {v} came back");
    }
    for v in &acked.gone {
        assert!(
            known.contains(v),
            "{v}, destroyed on the array, was dropped"
        );
    }
    for n in &names {
        let (_, v) = super::get_json(client, &format!("{url}/{n}")).await;
        assert_eq!(v["volume"]["state"], settled(n), "{n} did not settle: {v}");
    }
    (known, acked)
}
