//! Jobs, the license, the HA cluster and system properties.

use serde_json::json;

use super::{Ctx, R, Req, not_found};

pub(super) fn job(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.query.allow(&[])?;
    super::poll(ctx, req.arg(0))
}

pub(super) fn license(_: &mut Ctx<'_>, req: &Req<'_>) -> R {
    req.one(json!({"valid": true, "expires": "2099-12-31T23:59:59Z",
                   "features": [{"name": "ha-cluster"}]}))
}

pub(super) fn property(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    match req.arg(0) {
        "system.guid" => req.one(json!({"id": "system.guid", "value": ctx.a.guid})),
        other => Err(not_found("property", other)),
    }
}

/// The HA cluster both instances of a pair belong to (named after the shared state).
pub(super) fn clusters(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    let cluster = json!({
        "clusterName": format!("storch-sim-{}", &ctx.a.guid[..8].to_lowercase()),
        "nodes": [{"name": "node-a"}, {"name": "node-b"}],
    });
    req.page(ctx, &[], vec![cluster])
}
