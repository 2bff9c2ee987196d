//! `events [--object KIND/NAME] [--since SEQ] [--limit N] [--follow]` from a server: one line
//! per event (sequence, time, request id, kind, summary), or the whole events as JSON/YAML.

use serde_json::Value;

use super::client::Ctx;
use crate::cli::client_args::{EventFilterArgs, EventsArgs, OutputFormat};
use crate::cli::error::{CliError, CliResult, RestError};
use crate::cli::output::{emit, items_doc, text, yaml_text};

pub async fn run(ctx: &Ctx, args: EventsArgs) -> CliResult<()> {
    let mut url = ctx.rest.url(&["events"]);
    {
        let EventFilterArgs {
            object,
            since,
            limit,
        } = &args.filter;
        let mut query = url.query_pairs_mut();
        if let Some(object) = object {
            query.append_pair("object", object);
        }
        if let Some(since) = since {
            query.append_pair("since", &since.to_string());
        }
        if let Some(limit) = limit {
            query.append_pair("limit", &limit.to_string());
        }
        if args.follow {
            query.append_pair("follow", "true");
        }
    }
    if args.follow {
        return follow(ctx, url).await;
    }
    let what = "could not get events";
    let doc = ctx
        .rest
        .get(url.clone())
        .await
        .map_err(|e| CliError::rest(what, e))?;
    let Some(events) = doc.get("events").and_then(Value::as_array) else {
        return Err(CliError::rest(
            what,
            RestError::BadResponse {
                url: url.to_string(),
                detail: "there is no \"events\" list in the answer".into(),
            },
        ));
    };
    let out = match ctx.format {
        OutputFormat::Json | OutputFormat::Yaml => items_doc(ctx.format, events)?,
        format => events.iter().map(|e| event_line(format, e)).collect(),
    };
    ctx.write(&out)
}

/// Prints events as the server streams them (NDJSON) until it closes the stream, or the
/// reader of our output goes away.
async fn follow(ctx: &Ctx, url: crate::net::Url) -> CliResult<()> {
    let what = "could not follow events";
    let mut response = ctx
        .rest
        .open_stream(url.clone())
        .await
        .map_err(|e| CliError::rest(what, e))?;
    let mut stdout = std::io::stdout().lock();
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let chunk = response
            .chunk()
            .await
            .map_err(|e| CliError::rest(what, ctx.rest.body_error(&url, e)))?;
        let done = chunk.is_none();
        match chunk {
            Some(bytes) => pending.extend_from_slice(&bytes),
            // The stream ended: an unterminated last line still counts.
            None if !pending.is_empty() => pending.push(b'\n'),
            None => {}
        }
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let event: Value = serde_json::from_slice(&line).map_err(|e| {
                CliError::rest(
                    what,
                    RestError::BadResponse {
                        url: url.to_string(),
                        detail: format!("a streamed line is not JSON ({e})"),
                    },
                )
            })?;
            if event.get("seq").is_none()
                && let Some(message) = event.get("error").and_then(Value::as_str)
            {
                return Err(CliError::Failed(format!(
                    "the event stream failed: {message}"
                )));
            }
            let out = match ctx.format {
                OutputFormat::Json => format!("{event}\n"),
                OutputFormat::Yaml => format!("---\n{}", yaml_text(&event)?),
                format => event_line(format, &event),
            };
            if !emit(&mut stdout, &out)? {
                return Ok(());
            }
        }
        if done {
            return Ok(());
        }
    }
}

/// `     7  2026-03-01T12:00:00.123Z  <request id>  VolumeCreated  volume v1 created on …`;
/// `wide` adds the stream; `name` is the sequence alone.
pub fn event_line(format: OutputFormat, e: &Value) -> String {
    let seq = text(e, &["seq"]);
    match format {
        OutputFormat::Name => format!("{seq}\n"),
        format => {
            let stream = if format == OutputFormat::Wide {
                format!("{:<30}  ", text(e, &["stream"]))
            } else {
                String::new()
            };
            format!(
                "{seq:>6}  {}  {:<36}  {:<24}  {stream}{}\n",
                text(e, &["time"]),
                text(e, &["requestId"]),
                text(e, &["kind"]),
                text(e, &["summary"]),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn lines() {
        let e = json!({"seq": 7, "time": "2026-03-01T12:00:00.123Z", "requestId": "r1",
                       "kind": "VolumeCreated", "stream": "volume/v1",
                       "summary": "volume v1 created on lab/p1 (trident_v1)"});
        let line = event_line(OutputFormat::Table, &e);
        assert_eq!(
            line,
            format!(
                "     7  2026-03-01T12:00:00.123Z  r1{}  VolumeCreated{}  volume v1 created on lab/p1 (trident_v1)\n",
                " ".repeat(34),
                " ".repeat(11)
            )
        );
        assert!(event_line(OutputFormat::Wide, &e).contains("volume/v1"));
        assert_eq!(event_line(OutputFormat::Name, &e), "7\n");
    }
}
