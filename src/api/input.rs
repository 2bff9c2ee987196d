//! Parsing and validation of request input: plain functions, no HTTP.
//!
//! Everything a handler checks before calling the core lives here
//! (docs/trident-contract.md#request-validation): every error names the field it is about,
//! quotes at most a short prefix of the offending value, and never echoes a whole document
//! (backend configs hold passwords).
//!
//! The input policy, for every body: JSON is read strictly (`crate::yaml::parse_json`: a key
//! given twice is refused, as YAML's reader refuses it), YAML only where the body says it is
//! YAML, sizes strictly and stored canonical (`model::size`), attribute values checked
//! against what each attribute allows (`model::attributes`). Unknown fields: storch's own
//! bodies refuse them naming the field; Trident-shaped bodies (volume, storage class) accept
//! them, as Trident did, and the handler answers which were ignored under `warnings`.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::model::{
    CompiledClass, NameError, Protocol, RequestError, RequestedSize, ResizeRequest,
    SnapshotRequest, StorageClassConfig, VolumeConfig, VolumeRequest, ignored_warnings, quote,
};

/// Why a request's input was refused (all HTTP 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// A volume or storage-class body that is not valid JSON for its type; the message is
    /// serde_json's, prefixed with the path of the field where it applies.
    #[error("invalid JSON: {0}")]
    Json(String),
    /// A backend body that is neither valid JSON nor valid YAML, or not a mapping.
    #[error("invalid config format: {0}")]
    ConfigFormat(String),
    /// A message that already reads as a complete error (from the model's parsers).
    #[error("{0}")]
    Model(String),
    /// Trident's exact message for a volume without `name` or `size`.
    #[error("the following fields for \"Volume\" are mandatory: name and size")]
    VolumeMandatory,
    /// A name in the body or the path that cannot be an object name.
    #[error("{0}")]
    Name(#[from] NameError),
    /// A path segment that could not be decoded.
    #[error("invalid path: {0}")]
    Path(String),
    /// A volume, snapshot or resize request the model refuses; the message names the field.
    #[error(transparent)]
    Request(#[from] RequestError),
    /// A storage class whose pool selectors do not compile.
    #[error("{0}")]
    PoolSelector(String),
    /// A required field that is missing or empty.
    #[error("{0} is mandatory")]
    Mandatory(&'static str),
    /// A query string that does not decode.
    #[error("invalid query string: {0}")]
    QueryString(String),
    /// A bad query parameter; `name` is the parameter (quoted when it is unknown).
    #[error("invalid query parameter {name}: {message}")]
    Query { name: String, message: String },
}

/// `GET /events` returns at most this many events unless `limit` says otherwise.
pub const DEFAULT_EVENTS_LIMIT: usize = 10_000;

/// The largest `limit` accepted by `GET /events`.
pub const MAX_EVENTS_LIMIT: usize = 100_000;

/// Checks an object name taken from the URL path (already percent-decoded by the router).
/// `field` is how the message names it, e.g. `backend name`.
pub fn path_name(field: &'static str, name: String) -> Result<String, InputError> {
    crate::model::validate_name(field, &name)?;
    Ok(name)
}

/// The language a document is written in, when something (a `Content-Type`) says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Json,
    Yaml,
}

/// Parses a backend config file (`storch create backend -f`): JSON, or YAML converted to JSON
/// as Trident does. The result is always a JSON object. A `backendName`, when given as a
/// non-empty string, must be a valid name.
pub fn parse_backend_doc(body: &[u8]) -> Result<Value, InputError> {
    parse_backend_as(body, None)
}

/// The `warnings` of an accepted backend config: one per key storch ignored, named by its
/// path (`defaults.fooBar`; a key's name, never a value), then the Trident fields it accepts
/// and ignores (`debug`, `disableDelete`).
pub fn backend_warnings(doc: &Value) -> Vec<String> {
    let mut warnings = ignored_warnings(crate::drivers::ignored_keys(doc));
    warnings.extend(crate::drivers::CommonConfig::warnings(doc));
    warnings
}

/// Parses a backend config body in the language its `Content-Type` gave (`None`: none given,
/// or a file: JSON, else YAML, as Trident reads it). A body typed JSON is never read as YAML.
pub fn parse_backend_as(body: &[u8], language: Option<Language>) -> Result<Value, InputError> {
    let text = std::str::from_utf8(body).map_err(|e| {
        InputError::ConfigFormat(format!(
            "the document is not valid UTF-8 (invalid byte at offset {})",
            e.valid_up_to()
        ))
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Err(InputError::ConfigFormat(
            "the document is empty".to_string(),
        ));
    }
    let looks_like_json = {
        let trimmed = text.trim_start();
        trimmed.starts_with('{') || trimmed.starts_with('[')
    };
    let doc = match language {
        Some(Language::Yaml) => crate::yaml::parse(text).map_err(InputError::ConfigFormat)?,
        Some(Language::Json) => crate::yaml::parse_json(text.as_bytes()).map_err(|e| {
            InputError::ConfigFormat(if looks_like_json {
                e
            } else {
                format!("{e} (a YAML body needs Content-Type: application/yaml)")
            })
        })?,
        None => sniffed(text, looks_like_json)?,
    };
    backend_object(doc)
}

/// A file's document: JSON, else YAML; an error in the language it apparently is in.
fn sniffed(text: &str, looks_like_json: bool) -> Result<Value, InputError> {
    match crate::yaml::parse_json(text.as_bytes()) {
        Ok(doc) => Ok(doc),
        Err(json_err) => match crate::yaml::parse(text) {
            Ok(doc) => Ok(doc),
            // Report in the language the client apparently wrote.
            Err(yaml_err) => Err(InputError::ConfigFormat(if looks_like_json {
                json_err
            } else {
                yaml_err
            })),
        },
    }
}

/// A backend document must be a mapping, and its `backendName` a name.
fn backend_object(doc: Value) -> Result<Value, InputError> {
    let Value::Object(map) = &doc else {
        return Err(InputError::ConfigFormat(format!(
            "expected a mapping of config keys, found {}",
            crate::model::json_kind(&doc)
        )));
    };
    if let Some(Value::String(name)) = map.get("backendName")
        && !name.is_empty()
    {
        crate::model::validate_name("backendName", name)?;
    }
    Ok(doc)
}

/// Decodes `T` from a JSON body read strictly (`crate::yaml::parse_json`: no key twice, no
/// trailing data); errors name the field (`size: invalid type: …`).
fn from_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, InputError> {
    from_json_reporting(body).map(|(value, _)| value)
}

/// [`from_json`], also answering the top-level fields `T` does not have (each named), for a
/// Trident-shaped body that ignores them.
fn from_json_reporting<T: DeserializeOwned>(body: &[u8]) -> Result<(T, Vec<String>), InputError> {
    let doc = crate::yaml::parse_json(body).map_err(InputError::Json)?;
    // serde's derived structs also accept a JSON list (fields by position); refuse that.
    if !doc.is_object() {
        let kind = crate::model::json_kind(&doc);
        let kind = kind.split_once(' ').map_or(kind, |(_, k)| k);
        return Err(InputError::Json(format!(
            "invalid type: {kind}, expected a JSON object"
        )));
    }
    let known = struct_fields::<T>();
    let unknown: Vec<&String> = doc
        .as_object()
        .into_iter()
        .flat_map(|m| m.keys())
        .filter(|k| !known.contains(&k.as_str()))
        .collect();
    let warnings = ignored_warnings(unknown);
    let value =
        serde_path_to_error::deserialize(doc).map_err(|e| InputError::Json(e.to_string()))?;
    Ok((value, warnings))
}

/// The field names a derived `Deserialize` struct reads: what serde hands
/// `deserialize_struct`, caught by a deserializer that reads nothing.
fn struct_fields<T: DeserializeOwned>() -> &'static [&'static str] {
    use serde::de::{Error as _, Visitor};
    struct Probe<'a>(&'a mut &'static [&'static str]);
    impl<'de> serde::Deserializer<'de> for Probe<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(Self::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(Self::Error::custom("fields read"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Probe(&mut fields));
    fields
}

/// Parses a POST volume body into the one [`VolumeRequest`] the core takes
/// (docs/trident-contract.md#request-validation): shape, mandatory fields (Trident's REST
/// handler wants `size` even for a clone), names, protocol, access mode and size.
pub fn parse_volume(body: &[u8]) -> Result<VolumeRequest, InputError> {
    parse_volume_reporting(body).map(|(request, _)| request)
}

/// [`parse_volume`], also answering a warning for each field the body has that a volume
/// config does not (Trident ignored them; storch says so).
pub fn parse_volume_reporting(body: &[u8]) -> Result<(VolumeRequest, Vec<String>), InputError> {
    let (config, warnings): (VolumeConfig, _) = from_json_reporting(body)?;
    if config.name.is_empty() || config.size.is_empty() {
        return Err(InputError::VolumeMandatory);
    }
    Ok((VolumeRequest::parse(config)?, warnings))
}

/// Parses a POST snapshot body, `{"name":"SNAP"}`, for `volume`.
pub fn parse_snapshot(volume: &str, body: &[u8]) -> Result<SnapshotRequest, InputError> {
    let req: crate::api::dto::SnapshotRequest = from_json(body)?;
    if req.name.is_empty() {
        return Err(InputError::Mandatory("name"));
    }
    Ok(SnapshotRequest::parse(volume, "name", &req.name)?)
}

/// Parses a POST resize body, `{"size":"2Gi"}`, for `volume`.
pub fn parse_resize(volume: &str, body: &[u8]) -> Result<ResizeRequest, InputError> {
    let req: crate::api::dto::ResizeRequest = from_json(body)?;
    if req.size.is_empty() {
        return Err(InputError::Mandatory("size"));
    }
    Ok(ResizeRequest::parse(volume, &req.size)?)
}

/// Parses a POST backend/{backend}/state body, `{"state":"suspended"}` or `"normal"`.
pub fn parse_backend_state(body: &[u8]) -> Result<crate::model::UserState, InputError> {
    let req: crate::api::dto::BackendStateRequest = from_json(body)?;
    if req.state.is_empty() {
        return Err(InputError::Mandatory("state"));
    }
    crate::model::UserState::parse("state", &req.state).map_err(InputError::Model)
}

/// Parses a POST volume/import body: the array volume by `backend` and `internalName` or by
/// `volumeHandle` (not both), the storch `name` and `storageClass`, and `noManage`.
pub fn parse_import(body: &[u8]) -> Result<crate::model::ImportRequest, InputError> {
    let req: crate::api::dto::ImportVolumeRequest = from_json(body)?;
    let handle = match (req.volume_handle.is_empty(), req.backend.is_empty()) {
        (false, true) if req.internal_name.is_empty() => {
            crate::model::VolumeHandle::parse(&req.volume_handle)?
        }
        (false, _) => {
            return Err(InputError::Model(
                "volumeHandle: give either volumeHandle or backend and internalName, not both"
                    .to_string(),
            ));
        }
        (true, true) => return Err(InputError::Mandatory("backend")),
        (true, false) if req.internal_name.is_empty() => {
            return Err(InputError::Mandatory("internalName"));
        }
        (true, false) => crate::model::VolumeHandle::new(&req.backend, &req.internal_name)?,
    };
    if req.name.is_empty() {
        return Err(InputError::Mandatory("name"));
    }
    if req.storage_class.is_empty() {
        return Err(InputError::Mandatory("storageClass"));
    }
    Ok(crate::model::ImportRequest::parse(
        handle,
        &req.name,
        &req.storage_class,
        !req.no_manage,
    )?)
}

/// The query of `GET /storageclass/{storageClass}/explain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExplainQuery {
    /// `Any` unless `protocol=file|block` (or `any`).
    pub protocol: Protocol,
    pub size_bytes: Option<u64>,
    /// `topology=KEY=VALUE[,KEY=VALUE…]`: a volume that must be reachable from this segment.
    pub topology: Option<crate::model::TopologyRequirement>,
}

/// The largest `limit` of a paged list (`GET /volume`, `/snapshot`, `…/explain`).
pub const MAX_PAGE_LIMIT: usize = 10_000;

/// `limit=N&continue=TOKEN` of a paged list: at most `limit` items, those after `after` (the
/// token a previous page's `continue` gave: the last item it held). Both optional; without
/// `limit` the answer is every item after the token, as Trident's lists are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageQuery {
    pub limit: Option<usize>,
    pub after: Option<String>,
}

/// The query of `GET /storageclass/{sc}/explain`, paged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PagedExplainQuery {
    pub explain: ExplainQuery,
    pub page: PageQuery,
}

/// Parses a list route's query: `limit` and `continue` only.
pub fn parse_page_query(pairs: &[(String, String)]) -> Result<PageQuery, InputError> {
    let params = query_params(pairs, &["limit", "continue"])?;
    page_of(&params)
}

fn page_of(
    params: &std::collections::BTreeMap<&'static str, &str>,
) -> Result<PageQuery, InputError> {
    let limit = match params.get("limit").copied() {
        None | Some("") => None,
        Some(s) => match s.parse::<usize>() {
            Ok(n) if (1..=MAX_PAGE_LIMIT).contains(&n) => Some(n),
            _ => {
                return Err(query_error(
                    "limit",
                    format!("{} is not a number from 1 to {MAX_PAGE_LIMIT}", quote(s)),
                ));
            }
        },
    };
    let after = match params.get("continue").copied() {
        None | Some("") => None,
        Some(token) if token.len() > 2 * crate::model::MAX_NAME_LEN + 1 => {
            return Err(query_error(
                "continue",
                "is longer than any token storch gives (the last item of a page)",
            ));
        }
        Some(token) => Some(token.to_string()),
    };
    Ok(PageQuery { limit, after })
}

/// The query of `GET /events`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventsQuery {
    pub filter: crate::actors::EventFilter,
    /// Stream events as they commit (NDJSON) instead of answering a list.
    pub follow: bool,
}

pub(crate) fn query_error(name: &str, message: impl Into<String>) -> InputError {
    InputError::Query {
        name: name.to_string(),
        message: message.into(),
    }
}

/// Each known parameter at most once, no unknown ones.
pub(crate) fn query_params<'a>(
    pairs: &'a [(String, String)],
    known: &[&'static str],
) -> Result<std::collections::BTreeMap<&'static str, &'a str>, InputError> {
    let mut out = std::collections::BTreeMap::new();
    for (name, value) in pairs {
        let Some(key) = known.iter().find(|k| **k == name.as_str()) else {
            return Err(query_error(
                &quote(name),
                format!("unknown parameter; accepted: {}", known.join(", ")),
            ));
        };
        if out.insert(*key, value.as_str()).is_some() {
            return Err(query_error(name, "given more than once"));
        }
    }
    Ok(out)
}

/// Parses `/readyz`'s query: `standby=ok` (Vault's `standbyok`) counts a caught-up etcd
/// standby as ready; nothing else is accepted. Returns whether it was given.
pub fn parse_readyz_query(pairs: &[(String, String)]) -> Result<bool, InputError> {
    let params = query_params(pairs, &["standby"])?;
    match params.get("standby").copied() {
        None => Ok(false),
        Some("ok") => Ok(true),
        Some(other) => Err(query_error(
            "standby",
            format!("{} is not accepted; the only value is ok", quote(other)),
        )),
    }
}

/// Parses `protocol=file|block|any`, `size=SIZE` and `topology=KEY=VALUE[,KEY=VALUE…]` (all
/// optional).
pub fn parse_explain_query(pairs: &[(String, String)]) -> Result<PagedExplainQuery, InputError> {
    let params = query_params(
        pairs,
        &["protocol", "size", "topology", "limit", "continue"],
    )?;
    let page = page_of(&params)?;
    let protocol = match params.get("protocol").copied() {
        None | Some("") | Some("any") => Protocol::Any,
        Some("file") => Protocol::File,
        Some("block") => Protocol::Block,
        Some(other) => {
            return Err(query_error(
                "protocol",
                format!("{} is not file, block or any", quote(other)),
            ));
        }
    };
    let size_bytes = match params.get("size").copied() {
        None | Some("") => None,
        Some(size) => Some(
            RequestedSize::parse(size)
                .map_err(|e| query_error("size", e.to_string()))?
                .bytes(),
        ),
    };
    let topology = match params.get("topology").copied() {
        None | Some("") => None,
        Some(text) => Some(parse_segment(text).map_err(|e| query_error("topology", e))?),
    };
    Ok(PagedExplainQuery {
        explain: ExplainQuery {
            protocol,
            size_bytes,
            topology,
        },
        page,
    })
}

/// `KEY=VALUE[,KEY=VALUE…]` as a requirement of one requisite segment, checked.
fn parse_segment(text: &str) -> Result<crate::model::TopologyRequirement, String> {
    let mut segment = crate::model::Segment::new();
    for pair in text.split(',') {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(format!("{} is not KEY=VALUE", quote(pair)));
        };
        segment.insert(k.trim().to_string(), v.trim().to_string());
    }
    crate::model::topology::check_segment("segment", &segment)?;
    Ok(crate::model::TopologyRequirement {
        requisite: vec![segment],
        preferred: Vec::new(),
    })
}

/// Parses `object=KIND/NAME`, `since=SEQ`, `limit=N` and `follow=true|false` (all optional).
/// A list is capped at [`DEFAULT_EVENTS_LIMIT`] events unless `limit` says otherwise; a
/// follow stream is endless unless `limit` is given.
pub fn parse_events_query(pairs: &[(String, String)]) -> Result<EventsQuery, InputError> {
    let params = query_params(pairs, &["object", "since", "continue", "limit", "follow"])?;
    let object = match params.get("object").copied() {
        None | Some("") => None,
        Some(object) => {
            let (kind, name) = object.split_once('/').ok_or_else(|| {
                query_error(
                    "object",
                    format!(
                        "{} is not volume/NAME, backend/NAME or storageclass/NAME",
                        quote(object)
                    ),
                )
            })?;
            if !matches!(kind, "volume" | "backend" | "storageclass") {
                return Err(query_error(
                    "object",
                    format!(
                        "unknown kind {}; expected volume, backend or storageclass",
                        quote(kind)
                    ),
                ));
            }
            crate::model::validate_name("name", name)
                .map_err(|e| query_error("object", e.to_string()))?;
            Some(object.to_string())
        }
    };
    // `continue` is the token a cut list gave: the sequence to go on from.
    let (name, given) = match (params.get("since"), params.get("continue")) {
        (Some(_), Some(_)) => {
            return Err(query_error(
                "continue",
                "goes without since (it is the since of the next page)",
            ));
        }
        (None, Some(c)) => ("continue", Some(*c)),
        (s, None) => ("since", s.copied()),
    };
    let since = match given {
        None | Some("") => 0,
        Some(s) => s.parse::<u64>().map_err(|_| {
            query_error(
                name,
                format!("{} is not a sequence number (0 or more)", quote(s)),
            )
        })?,
    };
    let follow = match params.get("follow").copied() {
        None | Some("false") | Some("0") => false,
        Some("") | Some("true") | Some("1") => true,
        Some(other) => {
            return Err(query_error(
                "follow",
                format!("{} is not true or false", quote(other)),
            ));
        }
    };
    let limit = match params.get("limit").copied() {
        None | Some("") => (!follow).then_some(DEFAULT_EVENTS_LIMIT),
        Some(s) => match s.parse::<usize>() {
            Ok(n) if (1..=MAX_EVENTS_LIMIT).contains(&n) => Some(n),
            _ => {
                return Err(query_error(
                    "limit",
                    format!("{} is not a number from 1 to {MAX_EVENTS_LIMIT}", quote(s)),
                ));
            }
        },
    };
    Ok(EventsQuery {
        filter: crate::actors::EventFilter {
            object,
            since,
            limit,
        },
        follow,
    })
}

/// Parses a POST storage class body (docs/trident-contract.md#storage-class-config) and checks its
/// name.
pub fn parse_storage_class(body: &[u8]) -> Result<StorageClassConfig, InputError> {
    parse_storage_class_reporting(body).map(|(config, _)| config)
}

/// [`parse_storage_class`], also answering a warning for each top-level field it ignored.
pub fn parse_storage_class_reporting(
    body: &[u8],
) -> Result<(StorageClassConfig, Vec<String>), InputError> {
    let doc = crate::yaml::parse_json(body).map_err(InputError::Json)?;
    let (config, ignored) =
        StorageClassConfig::from_value_reporting(doc).map_err(InputError::Json)?;
    crate::model::validate_name("name", &config.name)?;
    CompiledClass::compile(config.clone()).map_err(InputError::PoolSelector)?;
    Ok((config, ignored_warnings(ignored)))
}

#[cfg(test)]
mod tests;
