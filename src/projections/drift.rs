//! The fold of [`DriftEvent`]s: what reconciliation found on the arrays, and imports.

use super::{State, VolumeState};
use crate::events::{DriftEvent, VolumeEvent};
use crate::model::PoolRef;

impl State {
    pub(super) fn apply_drift(&mut self, name: &str, time_ms: u64, event: &DriftEvent) {
        if let DriftEvent::Imported {
            config,
            size_bytes,
            pool,
            protocol,
            access,
            secrets,
            managed,
        } = event
        {
            // A name already taken keeps its volume: the core never records such an import.
            if self.volumes.contains_key(name) {
                return;
            }
            self.apply_volume(
                name,
                time_ms,
                &VolumeEvent::Requested {
                    config: config.clone(),
                    size_bytes: *size_bytes,
                },
            );
            self.apply_volume(
                name,
                time_ms,
                &VolumeEvent::Created {
                    pool: pool.clone(),
                    internal_name: config.internal_name.clone(),
                    protocol: *protocol,
                    access: access.clone(),
                    secrets: secrets.clone(),
                    adopted: true,
                },
            );
            if !managed && let Some(vol) = self.volumes.0.get_mut(name) {
                vol.update_extra(|x| x.unmanaged = true);
            }
            return;
        }
        let Some(vol) = self.volumes.0.get_mut(name) else {
            return;
        };
        match event {
            DriftEvent::Imported { .. } => unreachable!("handled above"),
            // Only a created volume goes missing or comes back: a create or delete under way
            // decides its own outcome.
            DriftEvent::Missing { .. } => {
                if vol.state == VolumeState::Online {
                    vol.state = VolumeState::Missing;
                }
            }
            DriftEvent::Found { .. } => {
                if vol.state == VolumeState::Missing {
                    vol.state = VolumeState::Online;
                }
            }
            DriftEvent::ChangedOnArray {
                size_bytes, pool, ..
            } => {
                if vol.size_bytes != *size_bytes {
                    vol.size_bytes = *size_bytes;
                    vol.update_config(|c| c.size = size_bytes.to_string());
                }
                if let Some(placed) = vol.placed.clone()
                    && placed.pool != *pool
                {
                    vol.placed = Some(
                        self.interned
                            .intern(&PoolRef::new(placed.backend.clone(), pool.clone())),
                    );
                    drop(placed);
                    self.interned.prune();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Event, Noticed};
    use crate::model::{AccessInfo, Protocol, VolumeConfig};

    /// A commit time.
    const AT: u64 = 1_700_000_000_000;

    fn imported(managed: bool) -> Event {
        Event::volume(
            "v1",
            VolumeEvent::Drift(DriftEvent::Imported {
                config: Box::new(VolumeConfig {
                    name: "v1".into(),
                    internal_name: "legacy".into(),
                    size: "1073741824".into(),
                    storage_class: "gold".into(),
                    ..Default::default()
                }),
                size_bytes: 1 << 30,
                pool: PoolRef::new("b", "p1"),
                protocol: Protocol::File,
                access: Box::new(AccessInfo::default()),
                secrets: None,
                managed,
            }),
        )
    }

    fn drift(d: DriftEvent) -> Event {
        Event::volume("v1", VolumeEvent::Drift(d))
    }

    #[test]
    fn an_import_is_an_online_volume_placed_on_its_pool() {
        let mut s = State::default();
        s.apply(1, AT, &imported(false));
        let v = &s.volumes["v1"];
        assert_eq!(v.state, VolumeState::Online);
        assert_eq!(v.placement(), Some(&PoolRef::new("b", "p1")));
        assert_eq!(v.config().internal_name, "legacy");
        // Created when the import was committed, with the config's class and protocol.
        assert_eq!(v.created_ms(), Some(AT));
        assert_eq!((v.class(), v.protocol), ("gold", Protocol::File));
        assert!(!v.managed());
        let mut managed = State::default();
        managed.apply(1, AT, &imported(true));
        assert!(managed.volumes["v1"].managed());
        // A second import of the name changes nothing.
        s.apply(2, AT, &imported(true));
        assert!(!s.volumes["v1"].managed());
        // Round trip through a checkpoint keeps the flag.
        let back = State::decode(&s.encode()).unwrap();
        assert!(!back.volumes["v1"].managed());
    }

    #[test]
    fn missing_and_found_move_only_created_volumes() {
        let mut s = State::default();
        s.apply(1, AT, &imported(true));
        let missing = drift(DriftEvent::Missing {
            noticed_at: 5,
            how: Noticed::Start,
        });
        let found = drift(DriftEvent::Found {
            noticed_at: 6,
            how: Noticed::Periodic,
        });
        s.apply(2, AT, &missing);
        assert_eq!(s.volumes["v1"].state, VolumeState::Missing);
        s.apply(3, AT, &found);
        assert_eq!(s.volumes["v1"].state, VolumeState::Online);
        s.apply(4, AT, &Event::volume("v1", VolumeEvent::DeleteRequested));
        s.apply(5, AT, &missing);
        assert_eq!(s.volumes["v1"].state, VolumeState::Deleting);
        s.apply(6, AT, &found);
        assert_eq!(s.volumes["v1"].state, VolumeState::Deleting);
    }

    #[test]
    fn a_change_on_the_array_moves_size_and_pool() {
        let mut s = State::default();
        s.apply(1, AT, &imported(true));
        s.apply(
            2,
            AT,
            &drift(DriftEvent::ChangedOnArray {
                size_bytes: 2 << 30,
                pool: "p2".into(),
                how: Noticed::Requested,
            }),
        );
        let v = &s.volumes["v1"];
        assert_eq!(v.size_bytes, 2 << 30);
        assert_eq!(v.config().size, (2u64 << 30).to_string());
        assert_eq!(v.placement(), Some(&PoolRef::new("b", "p2")));
    }
}
