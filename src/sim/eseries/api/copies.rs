//! Volume copy jobs (a full copy of one volume onto another), only on an array whose
//! `--features` include `copy` (otherwise every request is 422 `featureNotSupported`).
//!
//! Creating a job starts it (`inProgress`); it completes after `copy_polls` reads of it (or of
//! the list). The target must be at least as large as the source; a volume is in at most one
//! running job and is the target of at most one job. `…/volume-copy-jobs-control/{ref}` with
//! `?control=start` re-copies, `?control=stop` stops a running job.

use serde_json::{Value, json};

use super::volumes::in_running_copy;
use super::{Ctx, Fail, R, Req, invalid, no_content, not_found, ok, refuse, retcodes};
use crate::sim::eseries::state::{Array, CopyJob, now, prefix};

const PRIORITIES: &[&str] = &[
    "priority0",
    "priority1",
    "priority2",
    "priority3",
    "priority4",
];

fn supported(a: &Array) -> Result<(), Fail> {
    if a.features.copy {
        Ok(())
    } else {
        Err(refuse(
            retcodes::NOT_SUPPORTED,
            "This storage array does not support volume copy",
        ))
    }
}

pub fn job_json(r: &str, j: &CopyJob) -> Value {
    let total = j.polls_total.max(1);
    let percent = match j.status.as_str() {
        "complete" => 100,
        _ => (total - j.polls_left.min(total)) * 100 / total,
    };
    json!({
        "volcopyRef": r,
        "id": r,
        "status": j.status,
        "sourceVolume": j.source,
        "targetVolume": j.target,
        "copyPriority": j.priority,
        "targetWriteProtected": j.target_write_protected,
        "onlineCopy": j.online_copy,
        "copyStartTime": j.start_time.to_string(),
        "copyCompleteTime": j.complete_time.map_or_else(|| "0".to_string(), |t| t.to_string()),
        "percentComplete": percent,
    })
}

/// One read of a running job.
fn poll(ctx: &mut Ctx<'_>, r: &str) {
    if let Some(j) = ctx.p.array.copy_jobs.get_mut(r)
        && j.status == "inProgress"
    {
        j.polls_left = j.polls_left.saturating_sub(1);
        if j.polls_left == 0 {
            j.status = "complete".into();
            j.complete_time = Some(now());
        }
        ctx.dirty = true;
    }
}

pub(super) fn list(ctx: &mut Ctx<'_>, _: &Req<'_>) -> R {
    supported(&ctx.p.array)?;
    let refs: Vec<String> = ctx.p.array.copy_jobs.keys().cloned().collect();
    for r in &refs {
        poll(ctx, r);
    }
    ok(ctx
        .p
        .array
        .copy_jobs
        .iter()
        .map(|(r, j)| job_json(r, j))
        .collect())
}

fn job<'a>(a: &'a Array, r: &str) -> Result<&'a CopyJob, Fail> {
    a.copy_jobs
        .get(r)
        .ok_or_else(|| not_found("volume copy job", r))
}

pub(super) fn get(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    supported(&ctx.p.array)?;
    let r = req.arg(0);
    job(&ctx.p.array, r)?;
    poll(ctx, r);
    ok(job_json(r, &ctx.p.array.copy_jobs[r]))
}

fn priority(p: Option<&str>) -> Result<Option<String>, Fail> {
    match p {
        None => Ok(None),
        Some(p) if PRIORITIES.contains(&p) => Ok(Some(p.to_string())),
        Some(p) => Err(invalid(format!(
            "Invalid value for field copyPriority: {p:?} (priority0 to priority4)"
        ))),
    }
}

pub(super) fn create(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    supported(&ctx.p.array)?;
    let f = req.fields(&[
        "sourceId",
        "targetId",
        "copyPriority",
        "targetWriteProtected",
        "onlineCopy",
    ])?;
    let source = f.str("sourceId")?;
    let target = f.str("targetId")?;
    let priority = priority(f.opt_str("copyPriority")?)?.unwrap_or_else(|| "priority2".into());
    let protected = f.opt_bool("targetWriteProtected")?.unwrap_or(true);
    let online = f.opt_bool("onlineCopy")?.unwrap_or(false);
    let a = &ctx.p.array;
    let vol = |field: &str, r: &str| {
        a.volumes.get(r).ok_or_else(|| {
            refuse(
                retcodes::NOT_FOUND,
                format!("Invalid value for field {field}: no volume {r:?}"),
            )
        })
    };
    let (s, t) = (vol("sourceId", source)?, vol("targetId", target)?);
    if source == target {
        return Err(invalid("sourceId and targetId name the same volume"));
    }
    if t.capacity < s.capacity {
        return Err(refuse(
            "illegalParam",
            format!(
                "The target volume ({} bytes) is smaller than the source ({} bytes)",
                t.capacity, s.capacity
            ),
        ));
    }
    let busy = in_running_copy(a, source)
        || in_running_copy(a, target)
        || a.copy_jobs.values().any(|j| j.target == target)
        || s.expansion.is_some()
        || t.expansion.is_some();
    if busy {
        return Err(refuse(
            retcodes::BUSY,
            "The source or target volume is already in a volume copy or an expansion",
        ));
    }
    let polls = ctx.tuning.copy_polls;
    let start = now();
    let j = CopyJob {
        source: source.to_string(),
        target: target.to_string(),
        priority,
        target_write_protected: protected,
        online_copy: online,
        status: if polls == 0 { "complete" } else { "inProgress" }.into(),
        start_time: start,
        complete_time: (polls == 0).then_some(start),
        polls_left: polls,
        polls_total: polls,
    };
    let a = ctx.a();
    let r = a.new_ref(prefix::COPY_JOB);
    let out = job_json(&r, &j);
    a.copy_jobs.insert(r, j);
    ctx.dirty = true;
    ok(out)
}

/// `POST …/volume-copy-jobs/{ref}`: a new priority or write protection.
pub(super) fn update(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    supported(&ctx.p.array)?;
    let r = req.arg(0);
    let f = req.fields(&["copyPriority", "targetWriteProtected"])?;
    let priority = priority(f.opt_str("copyPriority")?)?;
    let protected = f.opt_bool("targetWriteProtected")?;
    job(&ctx.p.array, r)?;
    let j = ctx.a().copy_jobs.get_mut(r).expect("checked above");
    if let Some(p) = priority {
        j.priority = p;
    }
    if let Some(p) = protected {
        j.target_write_protected = p;
    }
    let out = job_json(r, j);
    ctx.dirty = true;
    ok(out)
}

pub(super) fn delete(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    supported(&ctx.p.array)?;
    let r = req.arg(0);
    job(&ctx.p.array, r)?;
    ctx.a().copy_jobs.remove(r);
    ctx.dirty = true;
    no_content()
}

/// `POST …/volume-copy-jobs-control/{ref}?control=start|stop`.
pub(super) fn control(ctx: &mut Ctx<'_>, req: &Req<'_>) -> R {
    supported(&ctx.p.array)?;
    let r = req.arg(0);
    let control = req
        .query
        .split('&')
        .find_map(|kv| kv.strip_prefix("control="));
    job(&ctx.p.array, r)?;
    let polls = ctx.tuning.copy_polls;
    let j = ctx.a().copy_jobs.get_mut(r).expect("checked above");
    match control {
        Some("start") => {
            j.status = if polls == 0 { "complete" } else { "inProgress" }.into();
            j.start_time = now();
            j.complete_time = (polls == 0).then_some(j.start_time);
            j.polls_left = polls;
            j.polls_total = polls;
        }
        Some("stop") if j.status == "inProgress" => j.status = "stopped".into(),
        Some("stop") => {
            return Err(refuse(
                "illegalParam",
                format!("Volume copy job {r} is not in progress ({})", j.status),
            ));
        }
        _ => {
            return Err(invalid(
                "Missing or invalid query parameter control: start or stop",
            ));
        }
    }
    let out = job_json(r, j);
    ctx.dirty = true;
    ok(out)
}
