//! Topology: where a backend's pools are reachable from (the backend config's
//! `supportedTopologies`, Trident's key), and what a create asks for (CSI's
//! `accessibility_requirements`). Pure data and rules; placement applies them.
//!
//! A segment is a map of topology labels, e.g. `{"topology.kubernetes.io/zone": "z1"}`. Keys
//! are an optional DNS-style prefix, `/`, and a name (CSI v1.12 §11); they compare
//! case-insensitively, values exactly. A pool with no segment is reachable from everywhere.
//! A pool segment `T` is reachable from a node in segment `R` when every label of `T` has the
//! same value in `R` (a region-wide pool serves every zone of its region).

use std::collections::BTreeMap;

/// One topology segment: label → value.
pub type Segment = BTreeMap<String, String>;

/// The zone label storch's node plugin reports (`storch csi node --zone`), and the one the
/// NexentaStor driver's `zone` key maps to.
pub const ZONE_KEY: &str = "topology.kubernetes.io/zone";

/// What a create asks for: reachable from at least one `requisite` segment (empty: no
/// constraint); `preferred` segments first, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopologyRequirement {
    pub requisite: Vec<Segment>,
    pub preferred: Vec<Segment>,
}

impl TopologyRequirement {
    /// Whether a pool reachable from `pool` (its segments; empty = everywhere) is reachable
    /// from some requisite segment (any pool is, without requisites).
    pub fn admits(&self, pool: &[Segment]) -> bool {
        self.requisite.is_empty() || self.requisite.iter().any(|r| reaches(pool, r))
    }

    /// Where a pool ranks in the preferred order: the index of the first preferred segment it
    /// is reachable from, else the number of preferred segments (after every preferred one).
    pub fn rank(&self, pool: &[Segment]) -> usize {
        self.preferred
            .iter()
            .position(|p| reaches(pool, p))
            .unwrap_or(self.preferred.len())
    }

    /// Checks every segment; the error names the field (`requisite[0]`, …).
    pub fn check(&self, field: &str) -> Result<(), String> {
        for (name, list) in [
            ("requisite", &self.requisite),
            ("preferred", &self.preferred),
        ] {
            for (i, s) in list.iter().enumerate() {
                check_segment(&format!("{field}.{name}[{i}]"), s)?;
            }
        }
        Ok(())
    }
}

/// Whether a pool with segments `pool` (empty = everywhere) is reachable from a node in
/// `node`.
pub fn reaches(pool: &[Segment], node: &Segment) -> bool {
    pool.is_empty() || pool.iter().any(|t| within(t, node))
}

/// Every label of `pool` has the same value in `node` (keys compared case-insensitively).
fn within(pool: &Segment, node: &Segment) -> bool {
    pool.iter().all(|(k, v)| {
        node.iter()
            .any(|(nk, nv)| nk.eq_ignore_ascii_case(k) && nv == v)
    })
}

/// Checks a segment: at least one label, each key and value as CSI §11 says. The error names
/// the field and the key.
pub fn check_segment(field: &str, segment: &Segment) -> Result<(), String> {
    if segment.is_empty() {
        return Err(format!("{field}: a segment needs at least one label"));
    }
    for (k, v) in segment {
        check_key(k).map_err(|e| format!("{field}: key {k:?}: {e}"))?;
        check_value(v).map_err(|e| format!("{field}.{k}: {e}"))?;
    }
    Ok(())
}

/// `[prefix/]name`: the prefix a lower-case DNS subdomain of at most 63 characters, the name
/// 1–63 characters, alphanumeric at both ends, `-`, `_` and `.` inside.
pub fn check_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 63
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            && p.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && p.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric());
        if !ok {
            return Err(
                "the prefix must be a lower-case DNS name of at most 63 characters".to_string(),
            );
        }
    }
    label("name", name)
}

/// At most 63 characters, alphanumeric at both ends, `-`, `_` and `.` inside.
pub fn check_value(value: &str) -> Result<(), String> {
    label("value", value)
}

fn label(what: &str, s: &str) -> Result<(), String> {
    let inner = s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    let ends = s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric());
    if s.is_empty() || s.len() > 63 || !inner || !ends {
        return Err(format!(
            "the {what} must be 1 to 63 letters, digits, '-', '_' or '.', with a letter or digit \
             at both ends"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(pairs: &[(&str, &str)]) -> Segment {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_pool_is_reachable_from_nodes_inside_its_segments() {
        let zone1 = seg(&[(ZONE_KEY, "z1")]);
        let node = seg(&[(ZONE_KEY, "z1"), ("topology.kubernetes.io/region", "r1")]);
        let other = seg(&[(ZONE_KEY, "z2"), ("topology.kubernetes.io/region", "r1")]);
        let region = seg(&[("topology.kubernetes.io/region", "r1")]);
        assert!(reaches(&[], &node), "no segment: everywhere");
        assert!(reaches(std::slice::from_ref(&zone1), &node));
        assert!(!reaches(std::slice::from_ref(&zone1), &other));
        assert!(
            reaches(std::slice::from_ref(&region), &other),
            "region-wide"
        );
        assert!(
            !reaches(std::slice::from_ref(&node), &zone1),
            "the node lacks the region label"
        );
        let upper = seg(&[("Topology.Kubernetes.io/Zone", "z1")]);
        assert!(
            reaches(std::slice::from_ref(&zone1), &upper),
            "keys ignore case"
        );
        assert!(
            !reaches(std::slice::from_ref(&zone1), &seg(&[(ZONE_KEY, "Z1")])),
            "values do not"
        );
    }

    #[test]
    fn requisites_admit_and_preferences_rank() {
        let z = |v: &str| seg(&[(ZONE_KEY, v)]);
        let req = TopologyRequirement {
            requisite: vec![z("z1"), z("z2")],
            preferred: vec![z("z2"), z("z1")],
        };
        assert!(req.admits(&[z("z1")]));
        assert!(!req.admits(&[z("z3")]));
        assert!(req.admits(&[]));
        assert_eq!(req.rank(&[z("z2")]), 0);
        assert_eq!(req.rank(&[z("z1")]), 1);
        assert_eq!(req.rank(&[z("z3")]), 2);
        assert!(TopologyRequirement::default().admits(&[z("z9")]));
    }

    #[test]
    fn keys_and_values_are_checked_naming_the_field() {
        assert!(check_segment("s", &seg(&[(ZONE_KEY, "z-1")])).is_ok());
        assert!(check_segment("s", &seg(&[("zone", "a.b_c")])).is_ok());
        let e = check_segment("s[0]", &Segment::new()).unwrap_err();
        assert!(e.starts_with("s[0]"), "{e}");
        for bad in [
            "Upper.io/zone",
            "/zone",
            "a/-zone",
            &format!("{}/z", "a".repeat(64)),
        ] {
            let e = check_segment("s", &seg(&[(bad, "z")])).unwrap_err();
            assert!(e.contains("key"), "{bad}: {e}");
        }
        for bad in ["", "-z", "z z", &"v".repeat(64)] {
            let e = check_segment("s", &seg(&[(ZONE_KEY, bad)])).unwrap_err();
            assert!(e.starts_with(&format!("s.{ZONE_KEY}")), "{bad:?}: {e}");
        }
        let req = TopologyRequirement {
            requisite: vec![seg(&[(ZONE_KEY, "ok")])],
            preferred: vec![seg(&[(ZONE_KEY, "no way")])],
        };
        assert!(req.check("t").unwrap_err().starts_with("t.preferred[0]"));
    }
}
