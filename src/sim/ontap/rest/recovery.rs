//! The recovery queue through ONTAP's private CLI passthrough (wire-protocols §5.5, whose
//! bodies are unverified): `GET /private/cli/volume/recovery-queue` lists the queue as the CLI
//! `volume recovery-queue show` does (`vserver`, `volume`), read from the array, and `POST
//! /private/cli/volume/recovery-queue/purge` with `{vserver, volume}` purges one entry through
//! ZAPI's `volume-recovery-queue-purge`.

use serde_json::{Value, json};

use super::collection::{Kind, list};
use super::{Answer, Ctx, Reply, Req, check_body, mapped, need, no_method, not_found};
use crate::wire::zapi::{Node, errno};

const QUEUED: Kind = Kind {
    keys: &["vserver", "volume"],
    known: &["vserver", "volume", "retention_hours", "volume_size"],
};

pub(super) fn route(ctx: &mut Ctx<'_>, r: &Req, m: &str, rest: &[&str]) -> Answer {
    match (m, rest) {
        ("GET", []) => {
            let now = crate::sim::ontap::state::now_secs();
            let mut recs: Vec<(String, Value)> = Vec::new();
            for s in ctx.visible() {
                let svm = &ctx.a.svms[&s];
                let keep = svm.retention_hours.saturating_mul(3600);
                for (volume, q) in &svm.recovery_queue {
                    if q.deleted.saturating_add(keep) <= now {
                        continue;
                    }
                    recs.push((
                        format!("{s}/{volume}"),
                        json!({"vserver": s, "volume": volume,
                               "retention_hours": svm.retention_hours,
                               "volume_size": q.volume.size}),
                    ));
                }
            }
            list(ctx.tuning, r, &QUEUED, recs)
        }
        ("POST", ["purge"]) => {
            check_body(r, &["vserver", "volume"])?;
            let vserver = need(r, "vserver")?;
            let volume = need(r, "volume")?;
            if !ctx.visible().contains(&vserver) {
                return Err(super::err(
                    404,
                    2621462,
                    format!("SVM \"{vserver}\" does not exist"),
                ));
            }
            let call = Node::new("volume-recovery-queue-purge")
                .with_leaf("volume-name", volume)
                .with_leaf("vserver-name", &vserver);
            ctx.zapi(&vserver, call).map_err(|f| {
                mapped(
                    f,
                    &[
                        (errno::EOBJECTNOTFOUND, 404, 4),
                        (
                            errno::EVSERVER_OP_NOT_ALLOWED,
                            403,
                            errno::EVSERVER_OP_NOT_ALLOWED,
                        ),
                    ],
                )
            })?;
            Ok(Reply::Ok(json!({})))
        }
        (_, [] | ["purge"]) => Err(no_method(r)),
        _ => Err(not_found(&format!("/api{}", r.path))),
    }
}
