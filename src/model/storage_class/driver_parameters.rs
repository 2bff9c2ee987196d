//! Driver parameters of a storage class: settings a class passes to the driver of the pool a
//! volume lands on (NexentaStor's `volumeGroup`, `dataIp`, `chapSecret`, …), never matched
//! against pool offers. Each driver declares the parameters it takes in [`DRIVER_PARAMETERS`];
//! a parameter no driver takes is refused naming it, and a class matches only pools whose
//! driver takes every parameter it has (and, for a parameter that selects the pool, whose
//! pool it names).
//!
//! In a recorded class the values of secret parameters are [`REDACTED`] and the values
//! themselves are sealed (`crate::secrets::seal_class`).

use std::collections::BTreeMap;

use super::super::attributes::clip;

/// What a secret parameter's value shows as in a recorded class and in any output.
pub const REDACTED: &str = "<redacted>";

/// The type of a parameter's value (always a string on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// Any string (may be empty).
    Text,
    /// Go's `strconv.ParseBool` spellings.
    Bool,
    /// A decimal integer above zero.
    PositiveInt,
    /// A secret of at least this many characters: sealed in events, redacted in output.
    Secret { min_chars: usize },
}

/// One class parameter a driver takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverParameter {
    pub name: &'static str,
    pub kind: ParamKind,
    /// The value names the pool: only that pool of the driver's backends matches.
    pub selects_pool: bool,
}

const fn param(name: &'static str, kind: ParamKind) -> DriverParameter {
    DriverParameter {
        name,
        kind,
        selects_pool: false,
    }
}

/// `nexentastor-iscsi` (the seed's class parameters, spec/wire-protocols.md §4).
const NEXENTASTOR: &[DriverParameter] = &[
    DriverParameter {
        name: "volumeGroup",
        kind: ParamKind::Text,
        selects_pool: true,
    },
    param("dataIp", ParamKind::Text),
    param("targetGroup", ParamKind::Text),
    param("target", ParamKind::Text),
    param("hostGroup", ParamKind::Text),
    param("sparseVolume", ParamKind::Bool),
    param("dynamicTargetLunAllocation", ParamKind::Bool),
    param("numOfLunsPerTarget", ParamKind::PositiveInt),
    param("useChapAuth", ParamKind::Bool),
    param("chapUser", ParamKind::Text),
    param("chapSecret", ParamKind::Secret { min_chars: 12 }),
];

/// `storageDriverName` → the class parameters it takes. A driver not listed takes none.
pub const DRIVER_PARAMETERS: &[(&str, &[DriverParameter])] = &[("nexentastor-iscsi", NEXENTASTOR)];

/// The class parameters `driver` takes.
pub fn parameters_of(driver: &str) -> &'static [DriverParameter] {
    DRIVER_PARAMETERS
        .iter()
        .find(|(d, _)| *d == driver)
        .map(|(_, p)| *p)
        .unwrap_or(&[])
}

/// `name` as `driver`'s parameter, if it takes it.
pub fn driver_parameter(driver: &str, name: &str) -> Option<&'static DriverParameter> {
    parameters_of(driver).iter().find(|p| p.name == name)
}

/// Whether some driver takes a parameter called `name` (and so a class may carry it).
pub fn is_driver_parameter(name: &str) -> bool {
    DRIVER_PARAMETERS
        .iter()
        .any(|(_, ps)| ps.iter().any(|p| p.name == name))
}

/// Whether `name` is a secret parameter of some driver.
pub fn is_secret_parameter(name: &str) -> bool {
    DRIVER_PARAMETERS.iter().any(|(_, ps)| {
        ps.iter()
            .any(|p| p.name == name && matches!(p.kind, ParamKind::Secret { .. }))
    })
}

/// Checks a class's parameters: each must be taken by some driver (by `backend_type`'s, when
/// the class asks for one) and have a value of that driver's type. Errors name the parameter
/// and the driver (`parameters.<name>: …`). Secret values are never echoed.
pub fn check_parameters(
    parameters: &BTreeMap<String, String>,
    backend_type: Option<&str>,
) -> Result<(), String> {
    for (name, value) in parameters {
        let field = format!("parameters.{}", clip(name));
        let takers: Vec<&DriverParameter> = match backend_type {
            Some(driver) => {
                let Some(p) = driver_parameter(driver, name) else {
                    return Err(format!(
                        "{field}: driver {} (the class's backendType) takes no such class \
                         parameter ({})",
                        clip(driver),
                        taken_by(driver)
                    ));
                };
                vec![p]
            }
            None => DRIVER_PARAMETERS
                .iter()
                .filter_map(|(_, ps)| ps.iter().find(|p| p.name == name))
                .collect(),
        };
        if takers.is_empty() {
            return Err(format!(
                "{field}: unknown class parameter: it is neither a storage attribute nor a \
                 parameter of any driver ({})",
                all_taken()
            ));
        }
        for p in takers {
            check_value(&field, p, value)?;
        }
    }
    Ok(())
}

fn check_value(field: &str, p: &DriverParameter, value: &str) -> Result<(), String> {
    match p.kind {
        ParamKind::Text => Ok(()),
        ParamKind::Bool => match value {
            "1" | "t" | "T" | "TRUE" | "true" | "True" | "0" | "f" | "F" | "FALSE" | "false"
            | "False" => Ok(()),
            _ => Err(format!(
                "{field}: expected true or false, got {:?}",
                clip(value)
            )),
        },
        ParamKind::PositiveInt => match value.parse::<u32>() {
            Ok(n) if n > 0 => Ok(()),
            _ => Err(format!(
                "{field}: expected a positive integer, got {:?}",
                clip(value)
            )),
        },
        // What output shows instead of a secret, sent back (e.g. a GET copied): refused.
        ParamKind::Secret { .. } if value == REDACTED => Err(format!(
            "{field}: {REDACTED} stands for a sealed secret in output; give the secret itself"
        )),
        ParamKind::Secret { min_chars } if value.chars().count() < min_chars => Err(format!(
            "{field}: a secret of at least {min_chars} characters is required (the value is not \
             shown)"
        )),
        ParamKind::Secret { .. } => Ok(()),
    }
}

fn taken_by(driver: &str) -> String {
    let names: Vec<&str> = parameters_of(driver).iter().map(|p| p.name).collect();
    if names.is_empty() {
        "it takes none".to_string()
    } else {
        format!("it takes {}", names.join(", "))
    }
}

fn all_taken() -> String {
    DRIVER_PARAMETERS
        .iter()
        .map(|(d, _)| format!("{d}: {}", taken_by(d).trim_start_matches("it takes ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Why a pool's driver cannot serve a class's parameters, if it cannot: a parameter its
/// driver does not take, or a pool-selecting parameter naming another pool.
pub(super) fn pool_refusal(
    parameters: &BTreeMap<String, String>,
    driver: Option<&str>,
    pool: &str,
) -> Option<(String, String)> {
    for (name, value) in parameters {
        let Some(p) = driver.and_then(|d| driver_parameter(d, name)) else {
            let why = match driver {
                Some(d) => format!("driver {d} does not take it"),
                None => "the pool names no driver (backendType)".to_string(),
            };
            return Some((name.clone(), why));
        };
        if p.selects_pool && value != pool {
            return Some((name.clone(), format!("selects pool {}", clip(value))));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn table_lookups() {
        assert!(is_driver_parameter("volumeGroup"));
        assert!(!is_driver_parameter("media"));
        assert!(is_secret_parameter("chapSecret"));
        assert!(!is_secret_parameter("chapUser"));
        assert!(parameters_of("ontap-nas").is_empty());
        assert!(
            driver_parameter("nexentastor-iscsi", "volumeGroup")
                .unwrap()
                .selects_pool
        );
    }

    #[test]
    fn checks_name_the_parameter_and_the_driver() {
        assert!(check_parameters(&map(&[("volumeGroup", "p/vg")]), None).is_ok());
        let e = check_parameters(&map(&[("colour", "red")]), None).unwrap_err();
        assert!(
            e.starts_with("parameters.colour: unknown class parameter"),
            "{e}"
        );
        assert!(e.contains("nexentastor-iscsi"), "{e}");
        let e = check_parameters(&map(&[("volumeGroup", "p/vg")]), Some("ontap-nas")).unwrap_err();
        assert!(
            e.contains("parameters.volumeGroup") && e.contains("ontap-nas"),
            "{e}"
        );
        let e = check_parameters(&map(&[("sparseVolume", "maybe")]), None).unwrap_err();
        assert!(e.contains("parameters.sparseVolume"), "{e}");
        let e = check_parameters(&map(&[("numOfLunsPerTarget", "0")]), None).unwrap_err();
        assert!(e.contains("positive"), "{e}");
        let e = check_parameters(&map(&[("chapSecret", "short-canary")]), None);
        assert!(e.is_ok());
        let e = check_parameters(&map(&[("chapSecret", "tiny-canary")]), None).unwrap_err();
        assert!(!e.contains("tiny-canary"), "{e}");
        let e = check_parameters(&map(&[("chapSecret", REDACTED)]), None).unwrap_err();
        assert!(e.contains("the secret itself"), "{e}");
    }

    #[test]
    fn pools_refused_by_driver_or_selection() {
        let p = map(&[("volumeGroup", "p/a")]);
        assert!(pool_refusal(&p, Some("nexentastor-iscsi"), "p/a").is_none());
        let (name, why) = pool_refusal(&p, Some("nexentastor-iscsi"), "p/b").unwrap();
        assert_eq!(name, "volumeGroup");
        assert!(why.contains("p/a"), "{why}");
        let (_, why) = pool_refusal(&p, Some("fake"), "p/a").unwrap();
        assert!(why.contains("driver fake"), "{why}");
        assert!(pool_refusal(&BTreeMap::new(), None, "x").is_none());
    }
}
