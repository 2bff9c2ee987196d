//! The query strings of the dashboard's read endpoints: plain functions, no HTTP. Every
//! refusal names the parameter.

use crate::actors::VolumeState;
use crate::actors::dashboard::{MAX_PAGE, VolumeColumn, VolumeQuery};
use crate::api::input::{InputError, query_error, query_params};
use crate::model::{Protocol, quote};

/// A page holds this many rows unless `limit` says otherwise.
pub const DEFAULT_PAGE: usize = 50;

/// Parses `GET /storch/v1/volumes`' query: filters `name` (a part of the name), `class`,
/// `backend`, `pool`, `state`, `protocol`; `sort` (a column, `-column` for descending);
/// `offset` and `limit` (1 to 1000, default 50). Empty values are no filter.
pub fn parse_volume_table(pairs: &[(String, String)]) -> Result<VolumeQuery, InputError> {
    let params = query_params(
        pairs,
        &[
            "name", "class", "backend", "pool", "state", "protocol", "sort", "offset", "limit",
        ],
    )?;
    let text = |key: &str| {
        params
            .get(key)
            .copied()
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let state = match params.get("state").copied() {
        None | Some("") => None,
        Some(s) => Some(
            [
                VolumeState::Creating,
                VolumeState::Online,
                VolumeState::Deleting,
                VolumeState::Missing,
            ]
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                query_error(
                    "state",
                    format!("{} is not creating, online, deleting or missing", quote(s)),
                )
            })?,
        ),
    };
    let protocol = match params.get("protocol").copied() {
        None | Some("") => None,
        Some("file") => Some(Protocol::File),
        Some("block") => Some(Protocol::Block),
        Some(other) => {
            return Err(query_error(
                "protocol",
                format!("{} is not file or block", quote(other)),
            ));
        }
    };
    let (sort, descending) = match params.get("sort").copied() {
        None | Some("") => (VolumeColumn::Name, false),
        Some(s) => {
            let (column, descending) = match s.strip_prefix('-') {
                Some(c) => (c, true),
                None => (s, false),
            };
            let column = VolumeColumn::parse(column).ok_or_else(|| {
                let names: Vec<&str> = VolumeColumn::ALL.iter().map(|(n, _)| *n).collect();
                query_error(
                    "sort",
                    format!(
                        "{} is not one of {} (with - for descending)",
                        quote(s),
                        names.join(", ")
                    ),
                )
            })?;
            (column, descending)
        }
    };
    let offset = match params.get("offset").copied() {
        None | Some("") => 0,
        Some(s) => s.parse::<usize>().map_err(|_| {
            query_error(
                "offset",
                format!("{} is not a number (0 or more)", quote(s)),
            )
        })?,
    };
    let limit = match params.get("limit").copied() {
        None | Some("") => DEFAULT_PAGE,
        Some(s) => match s.parse::<usize>() {
            Ok(n) if (1..=MAX_PAGE).contains(&n) => n,
            _ => {
                return Err(query_error(
                    "limit",
                    format!("{} is not a number from 1 to {MAX_PAGE}", quote(s)),
                ));
            }
        },
    };
    Ok(VolumeQuery {
        name: text("name"),
        class: text("class"),
        backend: text("backend"),
        pool: text("pool"),
        state,
        protocol,
        sort,
        descending,
        offset,
        limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(q: &[(&str, &str)]) -> Result<VolumeQuery, String> {
        let pairs: Vec<(String, String)> = q
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse_volume_table(&pairs).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_the_first_page_by_name() {
        let q = parse(&[]).unwrap();
        assert_eq!(q.sort, VolumeColumn::Name);
        assert!(!q.descending);
        assert_eq!((q.offset, q.limit), (0, DEFAULT_PAGE));
        assert_eq!(q.name, None);
        assert_eq!(parse(&[("name", ""), ("state", "")]).unwrap(), q);
    }

    #[test]
    fn filters_sort_and_page_are_read() {
        let q = parse(&[
            ("name", "pvc-1"),
            ("class", "gold"),
            ("backend", "b1"),
            ("pool", "p1"),
            ("state", "deleting"),
            ("protocol", "block"),
            ("sort", "-size"),
            ("offset", "100"),
            ("limit", "1000"),
        ])
        .unwrap();
        assert_eq!(q.name.as_deref(), Some("pvc-1"));
        assert_eq!(q.class.as_deref(), Some("gold"));
        assert_eq!(q.backend.as_deref(), Some("b1"));
        assert_eq!(q.pool.as_deref(), Some("p1"));
        assert_eq!(q.state, Some(VolumeState::Deleting));
        assert_eq!(q.protocol, Some(Protocol::Block));
        assert_eq!((q.sort, q.descending), (VolumeColumn::Size, true));
        assert_eq!((q.offset, q.limit), (100, 1000));
    }

    #[test]
    fn bad_values_name_their_parameter() {
        for (q, field) in [
            (("state", "gone"), "state"),
            (("protocol", "nfs"), "protocol"),
            (("sort", "colour"), "sort"),
            (("sort", "--name"), "sort"),
            (("offset", "-1"), "offset"),
            (("limit", "0"), "limit"),
            (("limit", "1001"), "limit"),
            (("limit", "x"), "limit"),
        ] {
            let err = parse(&[q]).unwrap_err();
            assert!(
                err.starts_with(&format!("invalid query parameter {field}:")),
                "{q:?}: {err}"
            );
        }
        let err = parse(&[("colour", "red")]).unwrap_err();
        assert!(
            err.contains("\"colour\"") && err.contains("unknown"),
            "{err}"
        );
        let err = parse(&[("limit", "1"), ("limit", "2")]).unwrap_err();
        assert!(err.contains("more than once"), "{err}");
    }
}
