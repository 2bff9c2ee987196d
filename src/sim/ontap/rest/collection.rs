//! Collections: query filters (`name=prefix*`, `svm.uuid=…`, `!`, `|`, `<`, `>`), `fields=`
//! projection and `max_records` paging with an opaque `_links.next` cursor.

use serde_json::{Map, Value, json};

use super::{Answer, Reply, Req, RestError, bad_field};
use crate::sim::ontap::api::{Tuning, page_after, pattern_matches};

/// What a record type looks like to queries: its key fields (always returned) and the
/// top-level fields it has (anything else in `fields=` or a filter is refused).
pub(super) struct Kind {
    pub keys: &'static [&'static str],
    pub known: &'static [&'static str],
}

/// Query parameters that are not field filters.
const CONTROL: &[&str] = &[
    "fields",
    "max_records",
    "return_records",
    "return_timeout",
    "ignore_unknown_fields",
    "start",
    "order_by",
    "force",
    "allow_delete_while_mapped",
    "restore_to.snapshot.name",
];

/// Percent-decoding of a query or path part (`+` is a space in a query).
pub(super) fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let pair = b.get(i + 1..i + 3).and_then(|h| {
            std::str::from_utf8(h)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        });
        match (b[i], pair) {
            (b'%', Some(x)) => {
                out.push(x);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The opaque cursor of a `next` link: the last key of the page, in hex.
fn cursor(key: &str) -> String {
    key.bytes().map(|b| format!("{b:02x}")).collect()
}

fn from_cursor(c: &str) -> Option<String> {
    let bytes: Option<Vec<u8>> = (0..c.len())
        .step_by(2)
        .map(|i| c.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect();
    String::from_utf8(bytes?).ok()
}

pub(super) fn parse_query(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

/// ONTAP's field names use `_`; Trident asks for `logical-unit-number` too.
fn norm(name: &str) -> String {
    name.trim().replace('-', "_")
}

fn known(kind: &Kind, path: &str) -> bool {
    let first = path.split('.').next().unwrap_or_default();
    first == "_links" || kind.known.contains(&first)
}

/// The values at a dotted path (through arrays: every item's).
fn values_at<'v>(v: &'v Value, path: &[&str], out: &mut Vec<&'v Value>) {
    match (v, path.split_first()) {
        (Value::Array(items), _) => items.iter().for_each(|x| values_at(x, path, out)),
        (_, None) => out.push(v),
        (Value::Object(m), Some((first, rest))) => {
            if let Some(x) = m.get(*first) {
                values_at(x, rest, out);
            }
        }
        _ => {}
    }
}

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether a record passes a filter `path=pattern` (`null` / `!null` test presence).
fn passes(record: &Value, path: &str, pattern: &str) -> bool {
    let parts: Vec<&str> = path.split('.').collect();
    let mut found = Vec::new();
    values_at(record, &parts, &mut found);
    match pattern {
        "null" => found.is_empty(),
        "!null" => !found.is_empty(),
        _ if found.is_empty() => pattern.starts_with('!'),
        _ => found.iter().any(|v| pattern_matches(pattern, &as_text(v))),
    }
}

/// Copies `path` of `src` into `dst`.
fn copy_path(src: &Value, path: &[&str], dst: &mut Value) {
    let Some((first, rest)) = path.split_first() else {
        *dst = src.clone();
        return;
    };
    match src {
        Value::Object(m) => {
            let Some(x) = m.get(*first) else { return };
            if !dst.is_object() {
                *dst = Value::Object(Map::new());
            }
            let slot = dst
                .as_object_mut()
                .map(|o| o.entry(first.to_string()).or_insert(Value::Null));
            if let Some(slot) = slot {
                copy_path(x, rest, slot);
            }
        }
        Value::Array(items) => {
            let mut out = match dst.take() {
                Value::Array(a) if a.len() == items.len() => a,
                _ => vec![Value::Null; items.len()],
            };
            for (i, x) in items.iter().enumerate() {
                copy_path(x, path, &mut out[i]);
            }
            *dst = Value::Array(out);
        }
        _ => {}
    }
}

/// The fields `fields=` asks for: `None` = everything.
fn wanted(r: &Req, kind: &Kind, default_all: bool) -> Result<Option<Vec<String>>, RestError> {
    let lenient = r.flag("ignore_unknown_fields");
    let list: Vec<String> = match r.param("fields") {
        None if default_all => return Ok(None),
        None => Vec::new(),
        Some(f) => f.split(',').map(norm).filter(|s| !s.is_empty()).collect(),
    };
    if list.iter().any(|f| f == "**" || f == "*") {
        return Ok(None);
    }
    let mut out = Vec::new();
    for f in list {
        if known(kind, &f) {
            out.push(f);
        } else if !lenient {
            return Err(bad_field(
                "fields",
                format!("The value \"{f}\" is invalid for field \"fields\""),
            ));
        }
    }
    Ok(Some(out))
}

fn project(kind: &Kind, fields: &Option<Vec<String>>, record: &Value) -> Value {
    let Some(fields) = fields else {
        return record.clone();
    };
    let mut out = Value::Object(Map::new());
    for f in kind
        .keys
        .iter()
        .map(|k| k.to_string())
        .chain(fields.iter().cloned())
    {
        let parts: Vec<&str> = f.split('.').collect();
        copy_path(record, &parts, &mut out);
    }
    out
}

/// The filters of a collection GET; unknown fields are refused (code 2, 400).
fn filters(r: &Req, kind: &Kind) -> Result<Vec<(String, String)>, RestError> {
    let lenient = r.flag("ignore_unknown_fields");
    let mut out = Vec::new();
    for (k, v) in &r.params {
        if CONTROL.contains(&k.as_str()) {
            continue;
        }
        let k = norm(k);
        if known(kind, &k) {
            out.push((k, v.clone()));
        } else if !lenient {
            return Err(bad_field(&k, format!("Unexpected argument \"{k}\"")));
        }
    }
    Ok(out)
}

/// Answers a collection GET from every (sort key, record).
pub(super) fn list(
    tuning: Tuning,
    r: &Req,
    kind: &Kind,
    mut records: Vec<(String, Value)>,
) -> Answer {
    let fields = wanted(r, kind, false)?;
    let filters = filters(r, kind)?;
    records.retain(|(_, rec)| filters.iter().all(|(p, v)| passes(rec, p, v)));
    let after = match r.param("start") {
        Some(c) => Some(from_cursor(c).ok_or_else(|| bad_field("start", "Invalid start cursor"))?),
        None => None,
    };
    let asked = match r.param("max_records") {
        None => usize::MAX,
        Some(m) => m
            .parse::<usize>()
            .ok()
            .filter(|m| *m >= 1)
            .ok_or_else(|| bad_field("max_records", format!("Invalid max_records \"{m}\"")))?,
    };
    let limit = asked.min(tuning.page_cap.max(1));
    let more = page_after(&mut records, after.as_deref(), limit);
    let self_href = if r.raw_query.is_empty() {
        format!("/api{}", r.path)
    } else {
        format!("/api{}?{}", r.path, r.raw_query)
    };
    let mut links = json!({"self": {"href": self_href}});
    if more && let Some((last, _)) = records.last() {
        // The request's own query, as it came, with the cursor replaced.
        let kept: Vec<String> = r
            .raw_query
            .split('&')
            .filter(|p| !p.is_empty() && !p.starts_with("start="))
            .map(str::to_string)
            .chain([format!("start={}", cursor(last))])
            .collect();
        links["next"] = json!({"href": format!("/api{}?{}", r.path, kept.join("&"))});
    }
    let out: Vec<Value> = records
        .iter()
        .map(|(_, rec)| project(kind, &fields, rec))
        .collect();
    Ok(Reply::Ok(json!({
        "records": out,
        "num_records": out.len(),
        "_links": links,
    })))
}

/// Answers a GET of one record (every field unless `fields=` narrows it).
pub(super) fn one(r: &Req, kind: &Kind, record: &Value) -> Answer {
    let fields = wanted(r, kind, true)?;
    let mut out = project(kind, &fields, record);
    out["_links"] = json!({"self": {"href": format!("/api{}", r.path)}});
    Ok(Reply::Ok(out))
}

/// The `return_records=true` body of a create: `{num_records: 1, records: [record]}`.
pub(super) fn created(r: &Req, record: Value, location: String) -> Answer {
    if r.flag("return_records") {
        Ok(Reply::Created(
            json!({"num_records": 1, "records": [record]}),
            location,
        ))
    } else {
        Ok(Reply::Created(json!({}), location))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parts_and_paths() {
        assert_eq!(
            parse_query("name=a%2Ab&fields=&x"),
            vec![
                ("name".into(), "a*b".into()),
                ("fields".into(), String::new()),
                ("x".into(), String::new())
            ]
        );
        assert_eq!(decode("%2Fvol%2Fv+1"), "/vol/v 1");
        assert_eq!(from_cursor(&cursor("svm1/vol é")).unwrap(), "svm1/vol é");
        assert_eq!(from_cursor("zz"), None);
        let rec = json!({"name": "v1", "svm": {"uuid": "u"}, "aggregates": [{"name": "a"}, {"name": "b"}]});
        assert!(passes(&rec, "aggregates.name", "b"));
        assert!(passes(&rec, "name", "v*"));
        assert!(!passes(&rec, "name", "!v*"));
        assert!(passes(&rec, "comment", "null"));
        let mut out = Value::Null;
        copy_path(&rec, &["aggregates", "name"], &mut out);
        assert_eq!(out, json!({"aggregates": [{"name": "a"}, {"name": "b"}]}));
    }
}
