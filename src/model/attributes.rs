//! Storage attributes: the registry of names and types, pool offers and class requests
//! (docs/trident-contract.md#storage-attributes).
//!
//! - A *request* is what a storage class asks for: a string on the wire, parsed into the
//!   attribute's registered type ([`Request::parse`]).
//! - An *offer* is what a pool provides: `{"offer":true}`, `{"min":N,"max":M}` or
//!   `{"offer":["a","b"]}` on the wire ([`Offer`], [`parse_offers`]).
//! - [`Offer::matches`] decides whether one offer satisfies one request.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::de::Error as _;
use serde::ser::SerializeStruct;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The type of a registered attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrType {
    Bool,
    Int,
    String,
}

impl AttrType {
    /// The Go type name Trident uses in its messages: `bool`, `int`, `string`.
    pub fn as_str(self) -> &'static str {
        match self {
            AttrType::Bool => "bool",
            AttrType::Int => "int",
            AttrType::String => "string",
        }
    }
}

impl fmt::Display for AttrType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a pool offers for one attribute. JSON: `{"offer":true}`, `{"min":N,"max":M}`,
/// `{"offer":["a","b"]}`.
#[derive(Debug, Clone, PartialEq, Eq, bincode::Encode, bincode::Decode)]
pub enum Offer {
    Bool(bool),
    Int { min: i64, max: i64 },
    Strings(BTreeSet<String>),
}

/// What a storage class requests for one attribute, parsed from its string value.
#[derive(Debug, Clone, PartialEq, Eq, bincode::Encode, bincode::Decode)]
pub enum Request {
    Bool(bool),
    Int(i64),
    String(String),
}

/// The registry (docs/trident-contract.md#attribute-registry-and-offers), sorted by name. The last
/// four exist for Trident's tests and are kept so that configs written for them still parse.
const REGISTRY: &[(&str, AttrType)] = &[
    ("IOPS", AttrType::Int),
    ("backendType", AttrType::String),
    ("clones", AttrType::Bool),
    ("encryption", AttrType::Bool),
    ("media", AttrType::String),
    ("nonexistentBool", AttrType::Bool),
    ("provisioningType", AttrType::String),
    ("recoveryTest", AttrType::Bool),
    ("snapshots", AttrType::Bool),
    ("testingAttribute", AttrType::Bool),
    ("uniqueOptions", AttrType::String),
];

/// The `storageDriverName`s a `backendType` may name: every driver storch has.
pub const BACKEND_TYPES: &[&str] = &[
    "eseries-iscsi",
    "fake",
    "local",
    "nexentastor-iscsi",
    "ontap-nas",
    "ontap-nas-economy",
    "ontap-nas-flexgroup",
    "ontap-san",
    "solidfire-san",
];

/// The values a string attribute may take, where it has a fixed set (case-sensitive, as
/// matching is). Requests and offers alike are checked against them, so a class asking for
/// `media: floppy` is refused rather than matching nothing forever.
pub fn allowed_values(name: &str) -> Option<&'static [&'static str]> {
    match name {
        "media" => Some(&["hdd", "hybrid", "ssd"]),
        "provisioningType" => Some(&["thick", "thin"]),
        "backendType" => Some(BACKEND_TYPES),
        _ => None,
    }
}

/// Checks a string value of attribute `name` against [`allowed_values`].
fn check_value(name: &str, value: &str) -> Result<(), String> {
    match allowed_values(name) {
        Some(allowed) if !allowed.contains(&value) => Err(format!(
            "invalid value {} for storage attribute {name}: expected one of {}",
            super::quote(value),
            allowed.join(", ")
        )),
        _ => Ok(()),
    }
}

/// The attribute registry: name (case-sensitive) → type. `None` for unknown names.
pub fn attr_type(name: &str) -> Option<AttrType> {
    REGISTRY.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Every registered attribute name with its type, sorted by name.
pub fn registered_attributes() -> impl Iterator<Item = (&'static str, AttrType)> {
    REGISTRY.iter().copied()
}

/// The longest piece of client input echoed back in an error message.
const MAX_ECHO: usize = 64;

/// The most values one string offer may list (`{"offer":["a","b",…]}`): an attribute has a
/// handful of values, and a pool's offers are copied into every answer that shows it.
pub const MAX_OFFERED_VALUES: usize = 64;

/// Client input as it may appear in an error message: cut to [`MAX_ECHO`] bytes (on a char
/// boundary) with a trailing `…`, so a huge value cannot blow up an error body or a log line.
pub(crate) fn clip(s: &str) -> Cow<'_, str> {
    if s.len() <= MAX_ECHO {
        return Cow::Borrowed(s);
    }
    let mut end = MAX_ECHO;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &s[..end]))
}

fn unrecognized(name: &str) -> String {
    format!("unrecognized storage attribute: {}", clip(name))
}

impl Request {
    /// Parses a request value for attribute `name` (docs/trident-contract.md#request-values): bools
    /// like Go's `strconv.ParseBool`, ints as signed 64-bit decimal, strings verbatim.
    pub fn parse(name: &str, value: &str) -> Result<Request, String> {
        let ty = attr_type(name).ok_or_else(|| unrecognized(name))?;
        let parsed = match ty {
            AttrType::Bool => parse_go_bool(value).map(Request::Bool),
            // `i64::from_str` takes what Go's `ParseInt(v, 10, 64)` takes: an optional sign
            // and decimal digits, nothing else (no spaces, no underscores, no `0x`).
            AttrType::Int => value.parse::<i64>().ok().map(Request::Int),
            AttrType::String => Some(Request::String(value.to_string())),
        };
        let parsed = parsed.ok_or_else(|| {
            format!(
                "storage attribute value ({}) doesn't match the specified type ({ty}) of \
                 attribute {name}",
                clip(value)
            )
        })?;
        if let Request::String(s) = &parsed {
            check_value(name, s)?;
        }
        Ok(parsed)
    }

    /// The type of this request's value.
    pub fn attr_type(&self) -> AttrType {
        match self {
            Request::Bool(_) => AttrType::Bool,
            Request::Int(_) => AttrType::Int,
            Request::String(_) => AttrType::String,
        }
    }
}

/// Go's `strconv.ParseBool`: exactly these twelve spellings.
fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Bool(b) => write!(f, "{b}"),
            Request::Int(i) => write!(f, "{i}"),
            Request::String(s) => f.write_str(s),
        }
    }
}

impl Offer {
    /// Whether this offer satisfies a request (docs/trident-contract.md#matching-one-offer). A type
    /// mismatch never matches.
    pub fn matches(&self, request: &Request) -> bool {
        match (self, request) {
            // An offer of `true` serves both requests; `false` serves only `false`.
            (Offer::Bool(offered), Request::Bool(wanted)) => *offered || !*wanted,
            (Offer::Int { min, max }, Request::Int(wanted)) => (*min..=*max).contains(wanted),
            (Offer::Strings(offered), Request::String(wanted)) => offered.contains(wanted),
            _ => false,
        }
    }

    /// The type of this offer.
    pub fn attr_type(&self) -> AttrType {
        match self {
            Offer::Bool(_) => AttrType::Bool,
            Offer::Int { .. } => AttrType::Int,
            Offer::Strings(_) => AttrType::String,
        }
    }

    /// A string-set offer from anything that yields strings.
    pub fn strings<I, S>(values: I) -> Offer
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Offer::Strings(values.into_iter().map(Into::into).collect())
    }

    /// Reads an offer from its JSON form, without knowing which attribute it is for.
    pub fn from_json_value(value: &Value) -> Result<Offer, String> {
        const SHAPES: &str =
            r#"expected {"offer":true|false}, {"min":N,"max":M} or {"offer":["a",...]}"#;
        let Some(obj) = value.as_object() else {
            return Err(format!("{SHAPES}, got {}", json_kind(value)));
        };
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        match keys.as_slice() {
            ["offer"] => match &obj["offer"] {
                Value::Bool(b) => Ok(Offer::Bool(*b)),
                Value::Array(items) if items.len() > MAX_OFFERED_VALUES => Err(format!(
                    "{} offered values, more than the {MAX_OFFERED_VALUES} an offer may list",
                    items.len()
                )),
                Value::Array(items) => items
                    .iter()
                    .map(|item| {
                        item.as_str().map(str::to_string).ok_or_else(|| {
                            format!("offered values must be strings, got {}", json_kind(item))
                        })
                    })
                    .collect::<Result<BTreeSet<String>, String>>()
                    .map(Offer::Strings),
                other => Err(format!(
                    "\"offer\" must be a boolean or a list of strings, got {}",
                    json_kind(other)
                )),
            },
            ["max", "min"] => {
                let int = |key: &str| {
                    obj[key].as_i64().ok_or_else(|| {
                        format!(
                            "\"{key}\" must be a signed 64-bit integer, got {}",
                            json_kind(&obj[key])
                        )
                    })
                };
                let (min, max) = (int("min")?, int("max")?);
                if min > max {
                    return Err(format!("\"min\" ({min}) is greater than \"max\" ({max})"));
                }
                Ok(Offer::Int { min, max })
            }
            _ => Err(format!(
                "{SHAPES}, got an object with keys [{}]",
                keys.iter().map(|k| clip(k)).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// Reads the offer of attribute `name`: the name must be registered and the JSON form must
    /// be the one of the attribute's type. Errors name the attribute.
    pub fn parse(name: &str, value: &Value) -> Result<Offer, String> {
        let ty = attr_type(name).ok_or_else(|| unrecognized(name))?;
        let offer = Offer::from_json_value(value)
            .map_err(|e| format!("invalid offer for storage attribute {name}: {e}"))?;
        check_type(name, ty, &offer)?;
        Ok(offer)
    }
}

fn check_type(name: &str, ty: AttrType, offer: &Offer) -> Result<(), String> {
    if offer.attr_type() == ty {
        if let Offer::Strings(set) = offer {
            for value in set {
                check_value(name, value)?;
            }
        }
        Ok(())
    } else {
        Err(format!(
            "invalid offer for storage attribute {name}: it has type {ty}, but the offer is a {} offer",
            offer.attr_type()
        ))
    }
}

/// Parses a pool's whole offer map, `{"<attribute>": <offer JSON>, …}`: every name must be
/// registered and every offer must have its attribute's type. Errors name the attribute.
pub fn parse_offers(value: &Value) -> Result<BTreeMap<String, Offer>, String> {
    let obj = value.as_object().ok_or_else(|| {
        format!(
            "offers must be an object of attribute → offer, got {}",
            json_kind(value)
        )
    })?;
    obj.iter()
        .map(|(name, v)| Ok((name.clone(), Offer::parse(name, v)?)))
        .collect()
}

/// Checks an already-typed offer map (one that came through [`Offer`]'s plain `Deserialize`,
/// which cannot know attribute names): every name registered, every offer of the right type.
pub fn check_offers(offers: &BTreeMap<String, Offer>) -> Result<(), String> {
    for (name, offer) in offers {
        let ty = attr_type(name).ok_or_else(|| unrecognized(name))?;
        check_type(name, ty, offer)?;
    }
    Ok(())
}

/// "a boolean", "a number", … for error messages.
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// A short human form for explanations: `true`, `[100, 5000]` (an inclusive range),
/// `{hdd, ssd}` (a set).
impl fmt::Display for Offer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Offer::Bool(b) => write!(f, "{b}"),
            Offer::Int { min, max } => write!(f, "[{min}, {max}]"),
            Offer::Strings(set) => {
                f.write_str("{")?;
                for (i, s) in set.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(s)?;
                }
                f.write_str("}")
            }
        }
    }
}

impl Serialize for Offer {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Offer::Bool(b) => {
                let mut st = s.serialize_struct("Offer", 1)?;
                st.serialize_field("offer", b)?;
                st.end()
            }
            Offer::Int { min, max } => {
                let mut st = s.serialize_struct("Offer", 2)?;
                st.serialize_field("min", min)?;
                st.serialize_field("max", max)?;
                st.end()
            }
            Offer::Strings(set) => {
                let mut st = s.serialize_struct("Offer", 1)?;
                st.serialize_field("offer", set)?;
                st.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Offer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        Offer::from_json_value(&value).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn registry() {
        let cases = [
            ("IOPS", Some(AttrType::Int)),
            ("snapshots", Some(AttrType::Bool)),
            ("clones", Some(AttrType::Bool)),
            ("encryption", Some(AttrType::Bool)),
            ("provisioningType", Some(AttrType::String)),
            ("backendType", Some(AttrType::String)),
            ("media", Some(AttrType::String)),
            ("recoveryTest", Some(AttrType::Bool)),
            ("uniqueOptions", Some(AttrType::String)),
            ("testingAttribute", Some(AttrType::Bool)),
            ("nonexistentBool", Some(AttrType::Bool)),
            // Case-sensitive lookups.
            ("iops", None),
            ("Snapshots", None),
            ("MEDIA", None),
            // Pool-selection keys are not attributes.
            ("storagePools", None),
            ("additionalStoragePools", None),
            ("excludeStoragePools", None),
            ("requiredStorage", None),
            ("", None),
        ];
        for (name, want) in cases {
            assert_eq!(attr_type(name), want, "{name}");
        }
        let names: Vec<_> = registered_attributes().map(|(n, _)| n).collect();
        assert_eq!(names.len(), 11);
        assert!(
            names.windows(2).all(|w| w[0] < w[1]),
            "registry must stay sorted"
        );
    }

    #[test]
    fn parse_bool_requests() {
        let cases = [
            ("1", Some(true)),
            ("t", Some(true)),
            ("T", Some(true)),
            ("TRUE", Some(true)),
            ("true", Some(true)),
            ("True", Some(true)),
            ("0", Some(false)),
            ("f", Some(false)),
            ("F", Some(false)),
            ("FALSE", Some(false)),
            ("false", Some(false)),
            ("False", Some(false)),
            ("tRUE", None),
            ("yes", None),
            ("no", None),
            ("on", None),
            ("2", None),
            ("", None),
            (" true", None),
            ("true ", None),
        ];
        for (value, want) in cases {
            let got = Request::parse("snapshots", value);
            match want {
                Some(b) => assert_eq!(got, Ok(Request::Bool(b)), "{value:?}"),
                None => assert_eq!(
                    got.unwrap_err(),
                    format!(
                        "storage attribute value ({value}) doesn't match the specified type \
                         (bool) of attribute snapshots"
                    ),
                    "{value:?}"
                ),
            }
        }
    }

    #[test]
    fn parse_int_requests() {
        let cases = [
            ("0", Some(0)),
            ("1500", Some(1500)),
            ("-7", Some(-7)),
            ("+7", Some(7)),
            ("007", Some(7)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("1.5", None),
            ("1e3", None),
            ("0x10", None),
            ("1_000", None),
            (" 1", None),
            ("1 ", None),
            ("", None),
            ("abc", None),
        ];
        for (value, want) in cases {
            let got = Request::parse("IOPS", value);
            match want {
                Some(i) => assert_eq!(got, Ok(Request::Int(i)), "{value:?}"),
                None => {
                    let err = got.unwrap_err();
                    assert!(
                        err.starts_with(&format!(
                            "storage attribute value ({value}) doesn't match the specified type (int)"
                        )),
                        "{value:?}: {err}"
                    );
                    assert!(err.contains("IOPS"), "{err}");
                }
            }
        }
    }

    #[test]
    fn values_are_checked_against_what_the_attribute_allows() {
        for (name, good, bad) in [
            ("media", "hybrid", "floppy"),
            ("media", "ssd", "SSD"),
            ("provisioningType", "thin", "thinnish"),
            ("backendType", "ontap-san", "ontap"),
        ] {
            assert_eq!(
                Request::parse(name, good),
                Ok(Request::String(good.to_string()))
            );
            let e = Request::parse(name, bad).unwrap_err();
            assert!(
                e.starts_with(&format!(
                    "invalid value \"{bad}\" for storage attribute {name}"
                )),
                "{e}"
            );
            assert!(
                Offer::parse(name, &json!({"offer": [good, bad]}))
                    .unwrap_err()
                    .contains(bad)
            );
        }
        let floppy: BTreeMap<String, Offer> =
            [("media".to_string(), Offer::strings(["floppy"]))].into();
        assert!(check_offers(&floppy).unwrap_err().contains("floppy"));
    }

    #[test]
    fn parse_string_requests_and_unknown_names() {
        for value in ["thin", "", " spaced ", "SSD", "true", "1500"] {
            assert_eq!(
                Request::parse("uniqueOptions", value),
                Ok(Request::String(value.to_string()))
            );
        }
        assert_eq!(
            Request::parse("iops", "5").unwrap_err(),
            "unrecognized storage attribute: iops"
        );
        assert_eq!(
            Request::parse("requiredStorage", "x").unwrap_err(),
            "unrecognized storage attribute: requiredStorage"
        );
        // Huge input is clipped in the message.
        let long = "x".repeat(10_000);
        assert!(Request::parse(&long, "1").unwrap_err().len() < 200);
        assert!(Request::parse("IOPS", &long).unwrap_err().len() < 300);
    }

    #[test]
    fn request_display_is_normalised() {
        let cases = [
            ("snapshots", "True", "true"),
            ("snapshots", "0", "false"),
            ("IOPS", "+0100", "100"),
            ("media", "ssd", "ssd"),
        ];
        for (name, value, shown) in cases {
            assert_eq!(Request::parse(name, value).unwrap().to_string(), shown);
        }
    }

    #[test]
    fn offer_matching() {
        let range = Offer::Int {
            min: 100,
            max: 5000,
        };
        let set = Offer::strings(["thin", "thick"]);
        let cases: &[(&Offer, Request, bool)] = &[
            // bool: true matches both, false only false.
            (&Offer::Bool(true), Request::Bool(true), true),
            (&Offer::Bool(true), Request::Bool(false), true),
            (&Offer::Bool(false), Request::Bool(false), true),
            (&Offer::Bool(false), Request::Bool(true), false),
            // int: inclusive range.
            (&range, Request::Int(99), false),
            (&range, Request::Int(100), true),
            (&range, Request::Int(2500), true),
            (&range, Request::Int(5000), true),
            (&range, Request::Int(5001), false),
            (&range, Request::Int(-1), false),
            (&Offer::Int { min: 7, max: 7 }, Request::Int(7), true),
            // string: exact, case-sensitive membership.
            (&set, Request::String("thin".into()), true),
            (&set, Request::String("thick".into()), true),
            (&set, Request::String("Thin".into()), false),
            (&set, Request::String("thi".into()), false),
            (&set, Request::String("".into()), false),
            (
                &Offer::Strings(BTreeSet::new()),
                Request::String("".into()),
                false,
            ),
            // type mismatch never matches.
            (&Offer::Bool(true), Request::Int(1), false),
            (&Offer::Bool(true), Request::String("true".into()), false),
            (&range, Request::Bool(true), false),
            (&range, Request::String("100".into()), false),
            (&set, Request::Bool(true), false),
            (&set, Request::Int(1), false),
        ];
        for (offer, request, want) in cases {
            assert_eq!(offer.matches(request), *want, "{offer:?} vs {request:?}");
        }
    }

    #[test]
    fn offer_json_round_trips() {
        let cases = [
            (Offer::Bool(true), json!({"offer": true})),
            (Offer::Bool(false), json!({"offer": false})),
            (
                Offer::Int {
                    min: 100,
                    max: 5000,
                },
                json!({"min": 100, "max": 5000}),
            ),
            (
                Offer::Int { min: -5, max: -5 },
                json!({"min": -5, "max": -5}),
            ),
            (
                Offer::strings(["thin", "thick"]),
                json!({"offer": ["thick", "thin"]}),
            ),
            (Offer::Strings(BTreeSet::new()), json!({"offer": []})),
        ];
        for (offer, wire) in cases {
            assert_eq!(serde_json::to_value(&offer).unwrap(), wire, "{offer:?}");
            assert_eq!(
                serde_json::from_value::<Offer>(wire.clone()).unwrap(),
                offer
            );
            // Also through text, and key order on the wire is min before max.
            let text = serde_json::to_string(&offer).unwrap();
            assert_eq!(serde_json::from_str::<Offer>(&text).unwrap(), offer);
        }
        assert_eq!(
            serde_json::to_string(&Offer::Int { min: 1, max: 2 }).unwrap(),
            r#"{"min":1,"max":2}"#
        );
        // Duplicates collapse and order does not matter.
        assert_eq!(
            serde_json::from_value::<Offer>(json!({"offer": ["b", "a", "b"]})).unwrap(),
            Offer::strings(["a", "b"])
        );
    }

    #[test]
    fn bad_offer_json() {
        let cases = [
            (json!(true), "got a boolean"),
            (json!(null), "got null"),
            (json!({}), "keys []"),
            (
                json!({"offer": "ssd"}),
                "boolean or a list of strings, got a string",
            ),
            (json!({"offer": [1]}), "must be strings, got a number"),
            (json!({"offer": true, "min": 1}), "keys [min, offer]"),
            (json!({"min": 1}), "keys [min]"),
            (json!({"min": 1, "max": 2, "x": 3}), "keys [max, min, x]"),
            (
                json!({"min": 1.5, "max": 2}),
                "\"min\" must be a signed 64-bit integer",
            ),
            (
                json!({"min": 1, "max": "2"}),
                "\"max\" must be a signed 64-bit integer",
            ),
            (
                json!({"min": 0, "max": u64::MAX}),
                "\"max\" must be a signed 64-bit integer",
            ),
            (json!({"min": 5, "max": 4}), "greater than"),
        ];
        for (wire, want) in cases {
            let err = serde_json::from_value::<Offer>(wire.clone())
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{wire}: {err}");
        }
    }

    #[test]
    fn offer_maps() {
        let ok = parse_offers(&json!({
            "snapshots": {"offer": true},
            "IOPS": {"min": 0, "max": 100},
            "media": {"offer": ["ssd"]},
        }))
        .unwrap();
        assert_eq!(ok.len(), 3);
        assert_eq!(ok["snapshots"], Offer::Bool(true));
        assert_eq!(ok["IOPS"], Offer::Int { min: 0, max: 100 });
        assert_eq!(ok["media"], Offer::strings(["ssd"]));
        assert_eq!(check_offers(&ok), Ok(()));
        assert_eq!(parse_offers(&json!({})).unwrap().len(), 0);

        let cases = [
            (json!([]), "offers must be an object"),
            (
                json!({"speed": {"offer": true}}),
                "unrecognized storage attribute: speed",
            ),
            (
                json!({"snapshots": {"offer": ["yes"]}}),
                "storage attribute snapshots: it has type bool",
            ),
            (
                json!({"IOPS": {"offer": true}}),
                "storage attribute IOPS: it has type int",
            ),
            (
                json!({"media": {"min": 1, "max": 2}}),
                "storage attribute media: it has type string",
            ),
            (
                json!({"media": "ssd"}),
                "invalid offer for storage attribute media",
            ),
        ];
        for (wire, want) in cases {
            let err = parse_offers(&wire).unwrap_err();
            assert!(err.contains(want), "{wire}: {err}");
        }

        let mut typed = BTreeMap::new();
        typed.insert("clones".to_string(), Offer::Int { min: 0, max: 1 });
        assert!(check_offers(&typed).unwrap_err().contains("clones"));
        typed.clear();
        typed.insert("Clones".to_string(), Offer::Bool(true));
        assert_eq!(
            check_offers(&typed).unwrap_err(),
            "unrecognized storage attribute: Clones"
        );
    }

    #[test]
    fn offer_display() {
        assert_eq!(Offer::Bool(false).to_string(), "false");
        assert_eq!(
            Offer::Int {
                min: 100,
                max: 5000
            }
            .to_string(),
            "[100, 5000]"
        );
        assert_eq!(Offer::strings(["ssd", "hdd"]).to_string(), "{hdd, ssd}");
        assert_eq!(Offer::Strings(BTreeSet::new()).to_string(), "{}");
    }

    #[test]
    fn bincode_round_trip() {
        let cfg = bincode::config::standard();
        for offer in [
            Offer::Bool(true),
            Offer::Int {
                min: -1,
                max: i64::MAX,
            },
            Offer::strings(["a", "b"]),
        ] {
            let bytes = bincode::encode_to_vec(&offer, cfg).unwrap();
            let (back, _): (Offer, _) = bincode::decode_from_slice(&bytes, cfg).unwrap();
            assert_eq!(back, offer);
        }
    }

    #[test]
    fn clipping() {
        assert_eq!(clip("short"), "short");
        let long = "é".repeat(100);
        let c = clip(&long);
        assert!(c.ends_with('…'));
        assert!(c.len() <= MAX_ECHO + '…'.len_utf8());
    }
}
