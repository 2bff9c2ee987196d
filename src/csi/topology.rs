//! CSI topology in and out (spec §11): `accessibility_requirements` and GetCapacity's
//! `accessible_topology` become a `model::TopologyRequirement` (checked; errors name the
//! field), a volume's segments become `accessible_topology`. Placement applies the
//! requirement (`actors::placement`); nothing here decides.

use tonic::Status;

use super::proto::{Topology, TopologyRequirement as CsiRequirement};
use crate::model::{Segment, TopologyRequirement};

/// A requirement from CreateVolume's `accessibility_requirements`; `None` when it names no
/// segment. A preferred segment outside the requisites is refused, as the spec pairs them.
pub fn requirement(
    field: &str,
    csi: Option<&CsiRequirement>,
) -> Result<Option<TopologyRequirement>, Status> {
    let Some(csi) = csi else {
        return Ok(None);
    };
    let segments = |list: &[Topology]| -> Vec<Segment> {
        list.iter()
            .map(|t| {
                t.segments
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .collect()
    };
    let req = TopologyRequirement {
        requisite: segments(&csi.requisite),
        preferred: segments(&csi.preferred),
    };
    if req.requisite.is_empty() && req.preferred.is_empty() {
        return Ok(None);
    }
    req.check(field).map_err(Status::invalid_argument)?;
    if !req.requisite.is_empty() {
        for (i, p) in req.preferred.iter().enumerate() {
            if !req.requisite.contains(p) {
                return Err(Status::invalid_argument(format!(
                    "{field}.preferred[{i}]: not among the requisite segments"
                )));
            }
        }
    }
    Ok(Some(req))
}

/// GetCapacity's `accessible_topology` (one segment) as a requirement; `None` when empty.
pub fn capacity_segment(
    field: &str,
    topology: Option<&Topology>,
) -> Result<Option<TopologyRequirement>, Status> {
    let Some(t) = topology.filter(|t| !t.segments.is_empty()) else {
        return Ok(None);
    };
    let segment: Segment = t
        .segments
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    crate::model::topology::check_segment(field, &segment).map_err(Status::invalid_argument)?;
    Ok(Some(TopologyRequirement {
        requisite: vec![segment],
        preferred: Vec::new(),
    }))
}

/// A volume's `accessible_topology`: its pool's segments (none: reachable from everywhere).
pub fn accessible(segments: &[Segment]) -> Vec<Topology> {
    segments
        .iter()
        .map(|s| Topology {
            segments: s.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::model::topology::ZONE_KEY;

    fn zone(z: &str) -> Topology {
        Topology {
            segments: HashMap::from([(ZONE_KEY.to_string(), z.to_string())]),
        }
    }

    #[test]
    fn requirements_are_read_and_checked() {
        assert_eq!(requirement("r", None).unwrap(), None);
        assert_eq!(
            requirement("r", Some(&CsiRequirement::default())).unwrap(),
            None
        );
        let req = requirement(
            "r",
            Some(&CsiRequirement {
                requisite: vec![zone("z1"), zone("z2")],
                preferred: vec![zone("z2")],
            }),
        )
        .unwrap()
        .unwrap();
        assert_eq!(req.requisite.len(), 2);
        assert_eq!(req.rank(&[req.requisite[1].clone()]), 0);
        let e = requirement(
            "r",
            Some(&CsiRequirement {
                requisite: vec![zone("z1")],
                preferred: vec![zone("z3")],
            }),
        )
        .unwrap_err();
        assert!(e.message().starts_with("r.preferred[0]"), "{}", e.message());
        let e = requirement(
            "r",
            Some(&CsiRequirement {
                requisite: vec![zone("bad value")],
                preferred: vec![],
            }),
        )
        .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().starts_with("r.requisite[0]"), "{}", e.message());
        assert!(
            capacity_segment("t", Some(&Topology::default()))
                .unwrap()
                .is_none()
        );
        assert!(capacity_segment("t", Some(&zone("-x"))).is_err());
        let segs = req.requisite.clone();
        assert_eq!(accessible(&segs)[0].segments[ZONE_KEY], "z1");
    }
}
