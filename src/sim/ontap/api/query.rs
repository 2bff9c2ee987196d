//! Iterators: ZAPI query patterns, paging with `next-tag`, `desired-attributes`.

use super::*;

/// Whether `value` matches a ZAPI query pattern: exact, `prefix*`, `*`, `!x`, `a|b`, `>n`,
/// `<n`.
pub fn pattern_matches(pattern: &str, value: &str) -> bool {
    pattern.split('|').any(|p| {
        if let Some(neg) = p.strip_prefix('!') {
            return !pattern_matches(neg, value);
        }
        if let Some(n) = p.strip_prefix('>') {
            return matches!((value.parse::<u64>(), n.parse::<u64>()), (Ok(v), Ok(n)) if v > n);
        }
        if let Some(n) = p.strip_prefix('<') {
            return matches!((value.parse::<u64>(), n.parse::<u64>()), (Ok(v), Ok(n)) if v < n);
        }
        match p.strip_suffix('*') {
            Some(prefix) => value.starts_with(prefix),
            None => p == value,
        }
    })
}

/// Whether a record matches a query object: every filled leaf of the query must match the
/// record's element at the same path (any item, for lists); fields are ANDed.
pub fn query_matches(q: &Node, r: &Node) -> bool {
    q.children.iter().all(|qc| {
        if qc.children.is_empty() {
            if qc.text.is_empty() {
                return true;
            }
            let Some(rc) = r.child(&qc.name) else {
                return false;
            };
            if rc.children.is_empty() {
                pattern_matches(&qc.text, &rc.text)
            } else {
                rc.children
                    .iter()
                    .any(|c| pattern_matches(&qc.text, &c.text))
            }
        } else {
            match r.child(&qc.name) {
                Some(rc) => {
                    // A list query (`<data-protocols><data-protocol>nfs</…></…>`) matches
                    // when the record's list holds each queried item.
                    if qc.children.iter().all(|c| c.children.is_empty())
                        && rc.children.iter().all(|c| c.children.is_empty())
                        && qc.children.iter().all(|c| {
                            c.name == rc.children.first().map(|x| x.name.as_str()).unwrap_or("")
                        })
                    {
                        qc.children.iter().all(|c| {
                            rc.children
                                .iter()
                                .any(|x| pattern_matches(&c.text, &x.text))
                        })
                    } else {
                        query_matches(qc, rc)
                    }
                }
                None => false,
            }
        }
    })
}

/// Keeps only the fields named in `desired` (present elements; an empty element keeps the
/// whole field).
pub fn project(desired: &Node, r: &Node) -> Node {
    if desired.children.is_empty() {
        return r.clone();
    }
    let mut out = Node::new(r.name.clone());
    for rc in &r.children {
        if let Some(dc) = desired.child(&rc.name) {
            out.children.push(project(dc, rc));
        }
    }
    out
}

pub(super) fn tag_for(api: &str, svm: &str, key: &str) -> String {
    Node::new(format!("{api}-key-td"))
        .with_leaf("key-0", svm)
        .with_leaf("key-1", key)
        .to_xml()
}

pub(super) fn key_from_tag(tag: &str) -> Option<String> {
    let n = crate::wire::zapi::parse(tag).ok()?;
    n.text_at("key-1").map(str::to_string)
}

/// Keeps one page of keyed records: sorted by key, those after the key `after` (the cursor of
/// a ZAPI `tag` or a REST `start`), at most `limit`. Returns whether more follow.
pub fn page_after<T>(records: &mut Vec<(String, T)>, after: Option<&str>, limit: usize) -> bool {
    records.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some(after) = after {
        records.retain(|(k, _)| k.as_str() > after);
    }
    let more = records.len() > limit;
    records.truncate(limit);
    more
}

/// Answers an `-iter` call from every record (key, record): query, paging, projection.
pub(super) fn iterate(ctx: &Ctx<'_>, api: &Node, mut records: Vec<(String, Node)>) -> R {
    if let Some(q) = api.at("query").and_then(|q| q.children.first()) {
        records.retain(|(_, r)| query_matches(q, r));
    }
    let after = match opt(api, "tag") {
        Some(tag) => {
            Some(key_from_tag(tag).ok_or_else(|| fail(errno::EINVALIDINPUTERROR, "Invalid tag"))?)
        }
        None => None,
    };
    let asked = opt(api, "max-records")
        .and_then(|m| m.parse::<u64>().ok())
        .unwrap_or(20)
        .max(1);
    let limit = (asked.min(ctx.tuning.page_cap as u64)) as usize;
    let more = page_after(&mut records, after.as_deref(), limit);
    let desired = api
        .at("desired-attributes")
        .and_then(|d| d.children.first());
    let mut out = Vec::new();
    let n = records.len();
    if n > 0 {
        let mut l = Node::new("attributes-list");
        for (_, r) in &records {
            l.push(match desired {
                Some(d) => project(d, r),
                None => r.clone(),
            });
        }
        out.push(l);
    }
    if more && let Some((k, _)) = records.last() {
        let svm = ctx.svm.clone().unwrap_or_default();
        out.push(Node::leaf("next-tag", tag_for(&api.name, &svm, k)));
    }
    out.push(leaf("num-records", n));
    Ok(out)
}

/// The SVMs a call sees: the tunnelled one, or all at cluster scope.
pub(super) fn visible_svms(ctx: &Ctx<'_>) -> Vec<String> {
    match &ctx.svm {
        Some(s) => vec![s.clone()],
        None => ctx.a.svms.keys().cloned().collect(),
    }
}
