//! CloneVolume and GetAsyncResult. A clone is made at once but stays out of the volume lists
//! for `clone_polls` polls (list calls, or GetAsyncResult on its handle, which answers
//! `running` meanwhile and `complete` after).

use serde_json::json;

use super::accounts::check_account;
use super::snapshots::existing;
use super::volumes::{access, active, check_name, check_size, check_space, insert, missing};
use super::{Ctx, Params, R, fail, names};
use crate::sim::solidfire::state::{AsyncJob, Volume, now_iso, take};

pub(super) fn clone_volume(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let src_id = p.id("volumeID")?;
    let src = active(ctx.c, src_id)?.clone();
    let name = p.str("name")?;
    check_name(name)?;
    let base_size = match p.opt_u64("snapshotID")? {
        None | Some(0) => src.total_size,
        Some(sid) => {
            let s = existing(ctx.c, sid)?;
            if s.volume_id != src_id {
                return Err(fail(
                    names::INVALID_PARAMETER,
                    format!(
                        "Invalid value for parameter snapshotID: snapshot {sid} is not of volume {src_id}"
                    ),
                ));
            }
            s.total_size
        }
    };
    let size = match p.opt_u64("newSize")? {
        None | Some(0) => base_size,
        Some(n) => check_size("newSize", n)?.max(base_size),
    };
    let account = match p.opt_u64("newAccountID")? {
        None | Some(0) => src.account_id,
        Some(a) => check_account(ctx.c, a)?,
    };
    let access = access(p)?.unwrap_or_else(|| "readWrite".into());
    let enable512e = p.opt_bool("enable512e")?.unwrap_or(src.enable512e);
    let attributes = p.attributes()?;
    check_space(ctx.c, size)?;
    let handle = take(&mut ctx.c.next.handle);
    let clone_id = take(&mut ctx.c.next.clone);
    let (id, out) = insert(
        ctx,
        Volume {
            name: name.to_string(),
            account_id: account,
            create_time: now_iso(),
            access,
            enable512e,
            total_size: size,
            attributes,
            hidden_polls: ctx.tuning.clone_polls,
            ..src
        },
    );
    ctx.c.asyncs.insert(
        handle,
        AsyncJob {
            result_type: "Clone".into(),
            create_time: now_iso(),
            volume_id: id,
            clone_id,
        },
    );
    ctx.dirty = true;
    Ok(json!({ "cloneID": clone_id, "volumeID": id, "asyncHandle": handle, "volume": out }))
}

pub(super) fn async_result(ctx: &mut Ctx<'_>, p: &Params<'_>) -> R {
    let handle = p.u64("asyncHandle")?;
    let keep = p.opt_bool("keepResult")?.unwrap_or(false);
    let job = ctx.c.asyncs.get(&handle).cloned().ok_or_else(|| {
        fail(
            names::ASYNC_HANDLE_DOES_NOT_EXIST,
            format!("Async handle {handle} does not exist."),
        )
    })?;
    let now = now_iso();
    let running = match ctx.c.volumes.get_mut(&job.volume_id) {
        Some(v) if v.hidden_polls > 0 => {
            v.hidden_polls -= 1;
            ctx.dirty = true;
            true
        }
        _ => false,
    };
    if running {
        return Ok(json!({
            "status": "running",
            "resultType": job.result_type,
            "createTime": job.create_time,
            "lastUpdateTime": now,
            "details": {"volumeID": job.volume_id, "cloneID": job.clone_id},
        }));
    }
    if !keep {
        ctx.c.asyncs.remove(&handle);
        ctx.dirty = true;
    }
    let body = if ctx.c.volumes.contains_key(&job.volume_id) {
        json!({"result": {"volumeID": job.volume_id, "cloneID": job.clone_id}})
    } else {
        let e = missing(job.volume_id);
        json!({"error": {"name": e.name, "message": e.message}})
    };
    let mut out = json!({
        "status": "complete",
        "resultType": job.result_type,
        "createTime": job.create_time,
        "lastUpdateTime": now,
    });
    if let (Some(o), Some(b)) = (out.as_object_mut(), body.as_object()) {
        o.extend(b.clone());
    }
    Ok(out)
}
