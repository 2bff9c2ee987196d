//! The ZAPI plumbing against hand-written, real-shaped responses served over TLS: failed
//! results, empty and absent `attributes-list`, multi-page iterators with escaped `next-tag`
//! key blobs, the busy class retried, HTTP 401, and malformed documents.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::json;
use storch::drivers::CommonConfig;
use storch::drivers::DriverError;
use storch::drivers::ontap::api::OntapApi;
use storch::drivers::ontap::client::{ZapiClient, ZapiError};
use storch::drivers::ontap::config::OntapConfig;
use storch::net::RetryPolicy;
use storch::sim::http::{Handler, HttpResponse, SelfSigned, Server};
use storch::wire::zapi::{self as xml, Node};

const PROLOG: &str = "<?xml version='1.0' encoding='UTF-8' ?>\n<!DOCTYPE netapp SYSTEM 'file:/etc/netapp_gx.dtd'>\n<netapp version='1.180' xmlns='http://www.netapp.com/filer/admin'>\n";

fn doc(results: &str) -> String {
    format!("{PROLOG}{results}</netapp>")
}

/// A server answering each request with the next canned response, and recording the requests.
struct Canned {
    server: Server,
    cert: SelfSigned,
    requests: Arc<Mutex<Vec<Node>>>,
}

async fn canned(responses: Vec<(u16, String)>) -> Canned {
    let cert = SelfSigned::generate(&[]).unwrap();
    let queue = Arc::new(Mutex::new(VecDeque::from(responses)));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let (q, r) = (queue.clone(), requests.clone());
    let handler: Handler = Arc::new(move |req| {
        let (q, r) = (q.clone(), r.clone());
        Box::pin(async move {
            let root = xml::parse(std::str::from_utf8(&req.body).unwrap()).unwrap();
            assert_eq!(root.name, "netapp");
            assert!(req.authorization.unwrap().starts_with("Basic "));
            r.lock().unwrap().push(root);
            let (status, body) = q
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or((500, "no more canned responses".into()));
            HttpResponse::new(status, "text/xml; charset=utf-8", body)
        })
    });
    let server = Server::start(([127, 0, 0, 1], 0).into(), Some(&cert), handler)
        .await
        .unwrap();
    Canned {
        server,
        cert,
        requests,
    }
}

fn client(c: &Canned) -> ZapiClient {
    let doc = json!({
        "version": 1, "storageDriverName": "ontap-nas",
        "managementLIF": c.server.local_addr().to_string(),
        "username": "admin", "password": "pw-never-shown",
        "trustedCACertificate": c.cert.cert_pem,
    });
    let common = CommonConfig::parse(&doc).unwrap();
    let cfg = OntapConfig::parse(&doc, &common).unwrap();
    ZapiClient::new(&cfg).unwrap().with_retry(RetryPolicy {
        max_attempts: 3,
        base_delay: std::time::Duration::from_millis(1),
        max_delay: std::time::Duration::from_millis(5),
    })
}

fn vol(name: &str, aggr: &str, size: u64) -> String {
    format!(
        "<volume-attributes><volume-id-attributes><name>{name}</name>\
         <containing-aggregate-name>{aggr}</containing-aggregate-name>\
         <owning-vserver-name>svm1</owning-vserver-name><style-extended>flexvol</style-extended>\
         </volume-id-attributes><volume-space-attributes><size>{size}</size>\
         <space-guarantee>none</space-guarantee></volume-space-attributes>\
         <volume-state-attributes><state>online</state></volume-state-attributes>\
         <unknown-extra><x>ignored</x></unknown-extra></volume-attributes>"
    )
}

fn key_blob(last: &str) -> String {
    format!(
        "&lt;volume-get-iter-key-td&gt;&lt;key-0&gt;svm1&lt;/key-0&gt;&lt;key-1&gt;{last}&lt;/key-1&gt;&lt;/volume-get-iter-key-td&gt;"
    )
}

#[tokio::test]
async fn multi_page_iterator_follows_next_tag() {
    let pages = vec![
        (
            200,
            doc(&format!(
                "<results status=\"passed\"><attributes-list>{}{}</attributes-list><next-tag>{}</next-tag><num-records>2</num-records></results>",
                vol("trident_a", "aggr1", 1 << 30),
                vol("trident_b", "aggr1", 2 << 30),
                key_blob("trident_b")
            )),
        ),
        (
            200,
            doc(&format!(
                "<results status=\"passed\"><attributes-list>{}</attributes-list><next-tag>{}</next-tag><num-records>1</num-records></results>",
                vol("trident_c", "aggr2", 3 << 30),
                key_blob("trident_c")
            )),
        ),
        (
            200,
            doc(&format!(
                "<results status=\"passed\"><attributes-list>{}</attributes-list><num-records>1</num-records></results>",
                vol("trident_d", "aggr2", 4 << 30),
            )),
        ),
    ];
    let c = canned(pages).await;
    let vols = client(&c)
        .volumes("svm1", "trident_*", Some("flexvol"))
        .await
        .unwrap();
    let names: Vec<&str> = vols.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["trident_a", "trident_b", "trident_c", "trident_d"]);
    assert_eq!(vols[2].aggregate, "aggr2");
    assert_eq!(vols[3].size, 4 << 30);
    assert_eq!(vols[0].space_guarantee, "none");

    let reqs = c.requests.lock().unwrap();
    assert_eq!(reqs.len(), 3);
    for r in reqs.iter() {
        assert_eq!(r.attr("vfiler"), Some("svm1"), "tunnelled to the SVM");
        assert_eq!(r.attr("version"), Some("1.21"));
        let api = &r.children[0];
        assert_eq!(api.name, "volume-get-iter");
        assert_eq!(
            api.str_at("query/volume-attributes/volume-id-attributes/name"),
            "trident_*"
        );
        assert_eq!(
            api.str_at("query/volume-attributes/volume-id-attributes/style-extended"),
            "flexvol"
        );
    }
    assert_eq!(reqs[0].children[0].text_at("tag"), None);
    // The tag goes back verbatim (unescaped text, escaped again on the wire).
    assert_eq!(
        reqs[1].children[0].str_at("tag"),
        "<volume-get-iter-key-td><key-0>svm1</key-0><key-1>trident_b</key-1></volume-get-iter-key-td>"
    );
    assert!(reqs[2].children[0].str_at("tag").contains("trident_c"));
}

#[tokio::test]
async fn no_match_is_an_empty_list_not_an_error() {
    let c = canned(vec![
        (200, doc("<results status=\"passed\"><num-records>0</num-records></results>")),
        (
            200,
            doc("<results status=\"passed\"><attributes-list/><num-records>0</num-records></results>"),
        ),
        // A next-tag with zero records stops the loop (as Trident does).
        (
            200,
            doc(&format!(
                "<results status=\"passed\"><next-tag>{}</next-tag><num-records>0</num-records></results>",
                key_blob("x")
            )),
        ),
    ])
    .await;
    let cl = client(&c);
    assert!(cl.volumes("svm1", "nope", None).await.unwrap().is_empty());
    assert!(cl.volume("svm1", "nope", None).await.unwrap().is_none());
    assert!(cl.volumes("svm1", "x*", None).await.unwrap().is_empty());
    assert_eq!(c.requests.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn failed_results_map_to_error_classes() {
    let c = canned(vec![
        (
            200,
            doc("<results status=\"failed\" errno=\"17\" reason=\"Duplicate volume name trident_pvc_1a2b.\"/>"),
        ),
        (
            200,
            doc("<results status=\"failed\" errno=\"13040\" reason=\"Volume &quot;x&quot; does not exist\"/>"),
        ),
        (
            200,
            doc("<results status=\"failed\" errno=\"13005\" reason=\"Unable to find API: aggr-get-iter on data vserver svm1\"/>"),
        ),
    ])
    .await;
    let cl = client(&c);
    let api = Node::new("volume-create").with_leaf("volume", "trident_pvc_1a2b");
    let e = cl.call(&api, Some("svm1")).await.unwrap_err();
    assert_eq!(e.errno(), Some(17));
    assert!(
        matches!(e.clone().into_driver(), DriverError::AlreadyExists(m) if m.contains("Duplicate volume name"))
    );
    let e = cl
        .call(&Node::new("volume-offline"), Some("svm1"))
        .await
        .unwrap_err();
    assert_eq!(e.reason(), "Volume \"x\" does not exist");
    assert!(matches!(e.into_driver(), DriverError::NotFound(_)));
    let e = cl
        .call(&Node::new("aggr-get-iter"), Some("svm1"))
        .await
        .unwrap_err();
    assert!(matches!(e.into_driver(), DriverError::Unsupported(_)));
}

#[tokio::test]
async fn job_exists_is_retried_then_succeeds() {
    let busy = doc(
        "<results status=\"failed\" errno=\"13001\" reason=\"Create volume trident_x: Job exists\"/>",
    );
    let c = canned(vec![
        (200, busy.clone()),
        (503, "busy".into()),
        (200, doc("<results status=\"passed\"/>")),
    ])
    .await;
    client(&c)
        .call(&Node::new("volume-create"), Some("svm1"))
        .await
        .unwrap();
    assert_eq!(c.requests.lock().unwrap().len(), 3);

    // Out of attempts: the busy error comes back, classified retryable.
    let c = canned(vec![(200, busy.clone()), (200, busy.clone()), (200, busy)]).await;
    let e = client(&c)
        .call(&Node::new("volume-create"), Some("svm1"))
        .await
        .unwrap_err();
    assert!(e.is_retryable());
    assert!(e.into_driver().is_retryable());
    // A plain failure is not retried.
    let c = canned(vec![(
        200,
        doc("<results status=\"failed\" errno=\"13001\" reason=\"injected\"/>"),
    )])
    .await;
    let e = client(&c)
        .call(&Node::new("volume-create"), Some("svm1"))
        .await
        .unwrap_err();
    assert!(!e.is_retryable());
    assert_eq!(c.requests.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn unauthorized_and_malformed() {
    let c = canned(vec![
        (401, "<html>401</html>".into()),
        (200, "<html>not zapi</html>".into()),
        (200, format!("{PROLOG}<results status=\"passed\">")),
        (
            200,
            doc("<results status=\"passed\"/><results status=\"passed\"/>"),
        ),
    ])
    .await;
    let cl = client(&c);
    let e = cl
        .call(&Node::new("system-get-version"), None)
        .await
        .unwrap_err();
    assert_eq!(e, ZapiError::Unauthorized);
    let msg = e.into_driver().to_string();
    assert!(
        msg.contains("credentials") && !msg.contains("pw-never-shown"),
        "{msg}"
    );
    for _ in 0..3 {
        let e = cl
            .call(&Node::new("system-get-version"), None)
            .await
            .unwrap_err();
        assert!(matches!(e, ZapiError::Malformed { .. }), "{e:?}");
    }
}

#[tokio::test]
async fn async_job_is_polled_until_success() {
    let c = canned(vec![
        (
            200,
            doc("<results status=\"passed\"><result-jobid>42</result-jobid><result-status>in_progress</result-status></results>"),
        ),
        (
            200,
            doc("<results status=\"passed\"><attributes-list><job-info><job-id>42</job-id><job-state>running</job-state></job-info></attributes-list><num-records>1</num-records></results>"),
        ),
        (
            200,
            doc("<results status=\"passed\"><attributes-list><job-info><job-id>42</job-id><job-state>success</job-state></job-info></attributes-list><num-records>1</num-records></results>"),
        ),
        (
            200,
            doc("<results status=\"passed\"><result-jobid>43</result-jobid><result-status>in_progress</result-status></results>"),
        ),
        (
            200,
            doc("<results status=\"passed\"><attributes-list><job-info><job-id>43</job-id><job-state>failure</job-state><job-status-code>13001</job-status-code><job-completion>no space</job-completion></job-info></attributes-list><num-records>1</num-records></results>"),
        ),
    ])
    .await;
    let cl = client(&c);
    let api = Node::new("volume-create-async").with_leaf("volume-name", "fg");
    cl.call_async(&api, Some("svm1"), std::time::Duration::from_secs(10))
        .await
        .unwrap();
    let e = cl
        .call_async(&api, Some("svm1"), std::time::Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(e.reason().contains("no space"), "{e}");
    let reqs = c.requests.lock().unwrap();
    // job-get-iter is cluster scope: not tunnelled.
    assert_eq!(reqs[1].children[0].name, "job-get-iter");
    assert_eq!(reqs[1].attr("vfiler"), None);
    assert_eq!(reqs[1].children[0].str_at("query/job-info/job-id"), "42");
}

/// Per-node publish and the recovery-queue purge over ZAPI against answers shaped like §1.9's
/// `lun-map` example: the map list first, then `lun-map` without a LUN id, ONTAP's number
/// read back; the "already so" errnos of igroup-add (9008), igroup-destroy (9029 still
/// mapped, 9003 gone) and lun-unmap (9016) are success; the purge takes only this volume's
/// queue entries.
#[tokio::test]
async fn lun_maps_igroups_and_the_recovery_queue_as_the_spec_shows() {
    let failed = |errno: u32| {
        doc(&format!(
            "<results status=\"failed\" errno=\"{errno}\" reason=\"r\"/>"
        ))
    };
    let passed = || doc("<results status=\"passed\"/>");
    let c = canned(vec![
        (
            200,
            doc("<results status=\"passed\"><initiator-groups/></results>"),
        ),
        (
            200,
            doc("<results status=\"passed\"><lun-id-assigned>1</lun-id-assigned></results>"),
        ),
        (200, failed(9008)),
        (200, failed(9029)),
        (200, failed(9003)),
        (200, failed(9016)),
        (
            200,
            doc("<results status=\"passed\"><attributes-list>\
                 <volume-recovery-queue-info><volume-name>trident_a_1042</volume-name>\
                 <vserver-name>svm1</vserver-name></volume-recovery-queue-info>\
                 <volume-recovery-queue-info><volume-name>trident_ab_1043</volume-name>\
                 <vserver-name>svm1</vserver-name></volume-recovery-queue-info>\
                 </attributes-list><num-records>2</num-records></results>"),
        ),
        (200, passed()),
    ])
    .await;
    let cl = client(&c);
    let path = "/vol/trident_pvc_9f/lun0";
    assert_eq!(cl.lun_map("svm1", path, "trident-node1").await.unwrap(), 1);
    let iqn = "iqn.1993-08.org.debian:01:node1";
    cl.igroup_add("svm1", "trident-node1", iqn).await.unwrap();
    assert!(
        !cl.igroup_destroy_unmapped("svm1", "trident-node1")
            .await
            .unwrap()
    );
    assert!(
        cl.igroup_destroy_unmapped("svm1", "trident-node1")
            .await
            .unwrap()
    );
    cl.lun_unmap("svm1", path, "trident-node1").await.unwrap();
    cl.recovery_queue_purge("svm1", "trident_a").await.unwrap();

    let reqs = c.requests.lock().unwrap();
    assert_eq!(reqs.len(), 8, "nothing else was sent");
    let call = |i: usize| reqs[i].children[0].clone();
    assert_eq!(call(0).name, "lun-map-list-info");
    let map = call(1);
    assert_eq!(map.name, "lun-map");
    assert_eq!(map.str_at("initiator-group"), "trident-node1");
    assert_eq!(map.str_at("path"), path);
    assert_eq!(map.text_at("lun-id"), None, "ONTAP picks the number");
    assert_eq!(reqs[1].attr("vfiler"), Some("svm1"));
    assert_eq!(call(2).str_at("initiator"), iqn);
    let list = call(6);
    assert_eq!(list.name, "volume-recovery-queue-get-iter");
    assert_eq!(
        list.str_at("query/volume-recovery-queue-info/volume-name"),
        "trident_a*"
    );
    let purge = call(7);
    assert_eq!(purge.name, "volume-recovery-queue-purge");
    assert_eq!(purge.str_at("volume-name"), "trident_a_1042");
    assert_eq!(purge.str_at("vserver-name"), "svm1");
}
