//! Offline audits of a stopped server's data dir: `events verify` (walk the hash chain),
//! `events export` (JSON lines) and `replay --until` (the state at a point of the log). They
//! open the event log themselves, so a running server (which holds its lock) is refused.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};

use crate::actors::EventRecord;
use crate::api::dto::{EventExternal, rfc3339_ms};
use crate::cli::client_args::{EventFilterArgs, EventsOffline, OutputFormat, ReplayArgs};
use crate::cli::error::{CliError, CliResult};
use crate::cli::output::{Kind, emit, json_text, yaml_text};
use crate::events::Event;
use crate::log::{Durability, Envelope, EventLog, LogError};
use crate::projections::State;

pub fn run(command: EventsOffline) -> CliResult<()> {
    match command {
        EventsOffline::Verify(dir) => verify(&dir.data_dir),
        EventsOffline::Export { data_dir, filter } => export(&data_dir.data_dir, &filter),
    }
}

/// Opens `DIR/log` of an existing data dir, politely refusing one a server holds.
fn open_log(data_dir: &Path) -> CliResult<EventLog> {
    let dir = data_dir.join("log");
    if !dir.is_dir() {
        return Err(CliError::Offline(format!(
            "there is no event log in {} (expected the data dir of a storch server, with a log \
             directory)",
            data_dir.display()
        )));
    }
    EventLog::open(&dir, Durability::Flush).map_err(|e| match e {
        LogError::Locked { .. } => CliError::Offline(format!(
            "the data dir {} is in use by a running storch; stop it or use the REST API",
            data_dir.display()
        )),
        other => CliError::Offline(format!(
            "could not open the event log in {}: {other}",
            dir.display()
        )),
    })
}

/// Each event from sequence `from` on, checked against the chain and decoded; the first bad
/// one ends the walk with [`CliError::Corrupt`] naming its sequence.
fn checked_events<'a>(
    log: &'a EventLog,
    data_dir: &'a Path,
    from: u64,
) -> impl Iterator<Item = CliResult<(Envelope, Event)>> + 'a {
    let corrupt = move |seq: u64, reason: String| CliError::Corrupt {
        dir: data_dir.display().to_string(),
        seq,
        reason,
    };
    log.read_from(from).enumerate().map(move |(n, env)| {
        let env = env.map_err(|e| match e {
            LogError::Corrupt { seq, reason } => corrupt(seq, reason),
            other => corrupt(from + n as u64, other.to_string()),
        })?;
        let event = crate::events::decode(env.schema, &env.payload)
            .map_err(|e| corrupt(env.seq, e.to_string()))?;
        Ok((env, event))
    })
}

/// `events verify`: exit 0 with a summary line, or 1 naming the first bad sequence (after a
/// line saying how many events before it check out), or the acknowledged sequences the log
/// lacks (its store ends before the watermark kept beside it).
fn verify(data_dir: &Path) -> CliResult<()> {
    let log = open_log(data_dir)?;
    let (head, _) = log.head();
    let mut good = 0u64;
    let mut stdout = std::io::stdout().lock();
    for item in checked_events(&log, data_dir, 1) {
        if let Err(e) = item {
            let line = format!(
                "event log in {}: {good} events check out, then a bad record\n",
                data_dir.display()
            );
            emit(&mut stdout, &line)?;
            return Err(e);
        }
        good += 1;
    }
    if let Err(LogError::Missing {
        head: last,
        acked,
        reason,
    }) = log.check_acknowledged()
    {
        let line = format!(
            "event log in {}: {good} events check out, but sequences {}..={acked} were \
             acknowledged and are missing\n",
            data_dir.display(),
            last + 1
        );
        emit(&mut stdout, &line)?;
        return Err(CliError::Corrupt {
            dir: data_dir.display().to_string(),
            seq: last + 1,
            reason: format!(
                "acknowledged records are missing ({reason}); `storch serve \
                 --truncate-corrupt-tail` cuts the log back to sequence {last}"
            ),
        });
    }
    let line = match log.anchor() {
        None => format!(
            "event log in {}: {good} events, hash chain intact up to sequence {head}\n",
            data_dir.display()
        ),
        Some(a) => format!(
            "event log in {}: starts from the checkpoint at sequence {} with recorded hash {}; \
             {good} events after it, hash chain intact up to sequence {head}\n",
            data_dir.display(),
            a.seq,
            hex::encode(a.hash)
        ),
    };
    emit(&mut stdout, &line).map(|_| ())
}

/// `events export`: one JSON object per line, as `GET /trident/v1/events` returns them.
fn export(data_dir: &Path, filter: &EventFilterArgs) -> CliResult<()> {
    if let Some(object) = &filter.object {
        check_object(object)?;
    }
    let log = open_log(data_dir)?;
    let mut stdout = std::io::stdout().lock();
    let mut written = 0usize;
    for item in checked_events(&log, data_dir, filter.since.unwrap_or(1).max(1)) {
        if filter.limit.is_some_and(|l| written >= l) {
            break;
        }
        let (env, event) = item?;
        if filter.object.as_ref().is_some_and(|o| *o != env.stream) {
            continue;
        }
        let mut line = event_json(env, event)?;
        line.push('\n');
        if !emit(&mut stdout, &line)? {
            return Ok(());
        }
        written += 1;
    }
    stdout.flush().map_err(CliError::Output)
}

/// An event as `GET /trident/v1/events` shows it (the REST API's own wire type).
fn event_json(env: Envelope, event: Event) -> CliResult<String> {
    let record = EventRecord {
        seq: env.seq,
        time_ms: env.time_ms,
        id: env.id,
        request_id: env.request_id,
        schema: env.schema,
        kind: env.kind,
        stream: env.stream,
        hash: hex::encode(env.hash),
        event,
    };
    let seq = record.seq;
    EventExternal::from_record(record)
        .and_then(|e| serde_json::to_string(&e))
        .map_err(|e| CliError::Failed(format!("could not write event {seq} as JSON: {e}")))
}

/// `KIND/NAME` with a kind the log has streams of.
fn check_object(object: &str) -> CliResult<()> {
    match object.split_once('/') {
        Some(("volume" | "backend" | "storageclass", name)) if !name.is_empty() => Ok(()),
        _ => Err(CliError::Usage(format!(
            "--object {object:?} is not volume/NAME, backend/NAME or storageclass/NAME"
        ))),
    }
}

/// Where `replay` stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    /// After this sequence.
    Seq(u64),
    /// After the last event committed at or before this time (Unix milliseconds).
    TimeMs(u64),
    /// At the head.
    End,
}

impl Until {
    fn parse(raw: Option<&str>) -> CliResult<Until> {
        let Some(raw) = raw.map(str::trim) else {
            return Ok(Until::End);
        };
        if !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit()) {
            return raw
                .parse()
                .map(Until::Seq)
                .map_err(|e| CliError::Usage(format!("invalid --until {raw:?}: {e}")));
        }
        parse_time_ms(raw).map(Until::TimeMs).ok_or_else(|| {
            CliError::Usage(format!(
                "invalid --until {raw:?}: expected a sequence number or an RFC 3339 time such \
                 as 2026-03-01T12:00:00Z"
            ))
        })
    }

    fn includes(self, env: &Envelope) -> bool {
        match self {
            Until::Seq(seq) => env.seq <= seq,
            Until::TimeMs(ms) => env.time_ms <= ms,
            Until::End => true,
        }
    }
}

/// RFC 3339 (`T` or a space between date and time, `Z` or a `±HH:MM` offset; no zone means
/// UTC) to Unix milliseconds. Times before 1970 are refused.
fn parse_time_ms(raw: &str) -> Option<u64> {
    let bytes = raw.as_bytes();
    let has_offset = bytes.len() > 6
        && matches!(bytes[bytes.len() - 6], b'+' | b'-')
        && bytes[bytes.len() - 3] == b':'
        // A date's own dashes are further left than a time's offset.
        && raw[..raw.len() - 6].contains(':');
    let (base, offset_minutes) = if has_offset {
        let (base, offset) = raw.split_at(raw.len() - 6);
        let hours: i64 = offset[1..3].parse().ok()?;
        let minutes: i64 = offset[4..6].parse().ok()?;
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        (base, sign * (hours * 60 + minutes))
    } else {
        (raw, 0)
    };
    let utc_as_given = humantime::parse_rfc3339_weak(base).ok()?;
    let ms = utc_as_given
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_millis();
    let ms = i64::try_from(ms).ok()? - offset_minutes * 60_000;
    u64::try_from(ms).ok()
}

/// `replay --until`: folds the log up to the bound and prints what existed then.
pub fn replay(args: &ReplayArgs, format: OutputFormat) -> CliResult<()> {
    let until = Until::parse(args.until.as_deref())?;
    let data_dir = &args.data_dir.data_dir;
    let log = open_log(data_dir)?;
    let mut state = State::default();
    let mut last_time = None;
    let mut events = checked_events(&log, data_dir, 1);
    loop {
        // Stop before reading past a sequence bound, so that a bad record after it does not
        // matter.
        if matches!(until, Until::Seq(n) if state.head >= n) {
            break;
        }
        let Some(item) = events.next() else { break };
        let (env, event) = item?;
        if !until.includes(&env) {
            break;
        }
        state.apply(env.seq, env.time_ms, &event);
        last_time = Some(env.time_ms);
    }
    drop(events);
    drop(log);
    let text = render_state(format, &state, last_time)?;
    emit(&mut std::io::stdout().lock(), &text).map(|_| ())
}

/// The state's objects in the REST API's shapes, so that they print like `get` output.
struct Objects {
    backends: Vec<Value>,
    classes: Vec<Value>,
    volumes: Vec<Value>,
}

fn objects(state: &State) -> Objects {
    let backends = state
        .backends
        .iter()
        .map(|(name, b)| {
            let config: Value = serde_json::from_str(&b.config).unwrap_or(Value::Null);
            let storage: BTreeMap<&str, Value> = b
                .pools
                .iter()
                .map(|p| {
                    (
                        p.name.as_str(),
                        json!({"name": p.name, "storageAttributes": p.offers,
                               "totalBytes": p.total_bytes}),
                    )
                })
                .collect();
            json!({
                "name": name,
                "protocol": b.protocol,
                "config": config,
                "storage": storage,
                "online": b.online,
                "volumes": b.volumes,
                "state": if b.online { "online" } else { "offline" },
                "userState": if b.suspended { "suspended" } else { "normal" },
            })
        })
        .collect();
    let classes = state
        .classes
        .values()
        .map(|config| json!({ "Config": config }))
        .collect();
    let mut names: Vec<&str> = state.volumes.keys().collect();
    names.sort();
    let volumes = names
        .into_iter()
        .map(|name| {
            let v = &state.volumes[name];
            json!({
                "Config": v.config(),
                "backend": v.backend(),
                "pool": v.pool(),
                "orphaned": v.orphaned,
                "state": v.state.as_str(),
                "sizeBytes": v.size_bytes,
                "snapshots": v.snapshots().keys().collect::<Vec<_>>(),
            })
        })
        .collect();
    Objects {
        backends,
        classes,
        volumes,
    }
}

fn render_state(format: OutputFormat, state: &State, time_ms: Option<u64>) -> CliResult<String> {
    let o = objects(state);
    let time = time_ms.map(rfc3339_ms);
    match format {
        OutputFormat::Json | OutputFormat::Yaml => {
            let doc = json!({
                "seq": state.head,
                "time": time,
                "backends": o.backends,
                "storageClasses": o.classes,
                "volumes": o.volumes,
            });
            if format == OutputFormat::Json {
                Ok(json_text(&doc))
            } else {
                yaml_text(&doc)
            }
        }
        OutputFormat::Name => {
            let mut out = String::new();
            for (prefix, kind, items) in [
                ("backend", Kind::Backend, &o.backends),
                ("storageclass", Kind::StorageClass, &o.classes),
                ("volume", Kind::Volume, &o.volumes),
            ] {
                for item in items {
                    out.push_str(&format!("{prefix}/{}\n", kind.name_of(item)));
                }
            }
            Ok(out)
        }
        OutputFormat::Table | OutputFormat::Wide => {
            let wide = format == OutputFormat::Wide;
            let mut out = match time {
                Some(time) => format!("As of sequence {} ({time}):\n", state.head),
                None => "As of the start of the log (no events):\n".to_string(),
            };
            for (title, kind, items) in [
                ("BACKENDS", Kind::Backend, &o.backends),
                ("STORAGE CLASSES", Kind::StorageClass, &o.classes),
                ("VOLUMES", Kind::Volume, &o.volumes),
            ] {
                out.push_str(&format!("\n{title}\n{}", kind.table(items, wide).render()));
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn until_bounds() {
        assert_eq!(Until::parse(None).unwrap(), Until::End);
        assert_eq!(Until::parse(Some("12")).unwrap(), Until::Seq(12));
        assert_eq!(
            Until::parse(Some("1970-01-01T00:00:01Z")).unwrap(),
            Until::TimeMs(1000)
        );
        assert_eq!(
            Until::parse(Some("1970-01-01T00:00:01.5Z")).unwrap(),
            Until::TimeMs(1500)
        );
        assert_eq!(
            Until::parse(Some("1970-01-01 01:00:01")).unwrap(),
            Until::TimeMs(3_601_000)
        );
        assert_eq!(
            Until::parse(Some("1970-01-01T02:00:00+01:00")).unwrap(),
            Until::TimeMs(3_600_000)
        );
        assert_eq!(
            Until::parse(Some("1970-01-01T00:00:00-00:30")).unwrap(),
            Until::TimeMs(1_800_000)
        );
        for bad in [
            "",
            "yesterday",
            "-1",
            "1970-01-01T00:00:00+01:00x",
            "1969-12-31T23:00:00Z",
        ] {
            assert!(Until::parse(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn objects_are_checked() {
        assert!(check_object("volume/v1").is_ok());
        assert!(check_object("storageclass/gold").is_ok());
        for bad in ["volume/", "v1", "pool/p"] {
            assert!(check_object(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_empty_state_prints() {
        let s = render_state(OutputFormat::Table, &State::default(), None).unwrap();
        assert!(s.starts_with("As of the start of the log"), "{s}");
        assert!(s.contains("BACKENDS\n+------+"), "{s}");
        let doc: Value = serde_json::from_str(
            &render_state(OutputFormat::Json, &State::default(), None).unwrap(),
        )
        .unwrap();
        assert_eq!(doc["seq"], 0);
        assert_eq!(doc["volumes"], json!([]));
        assert_eq!(
            render_state(OutputFormat::Name, &State::default(), None).unwrap(),
            ""
        );
    }
}
