//! Reads for the dashboard (`/ui/`): one call per page, each answered from the projection in
//! one pass, so a page costs the same few milliseconds with a million volumes as with ten.
//!
//! - [`Core::overview`]: backends with their state and pools (used, planned and free bytes,
//!   volume counts), totals, and what needs attention.
//! - [`Core::volume_table`]: a filtered, sorted page of the volume table.
//! - [`Core::volume_detail`]: one volume with its placement plan, attempts, snapshots, clones.
//! - [`Core::class_overview`]: every class with its explanation and how its volumes spread.
//! - [`Core::verify_log`]: the hash chain walked end to end.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use super::Core;
use crate::actors::error::CoreError;
use crate::log::VerifyReport;
use crate::model::{PoolRef, Protocol};
use crate::projections::{
    BackendState, BackendView, Explanation, SnapshotView, State, VolumeRecord, VolumeState,
    VolumeView,
};

/// How many names an alert lists (its count is always complete).
pub const ALERT_NAMES: usize = 20;

/// The largest page [`Core::volume_table`] returns.
pub const MAX_PAGE: usize = 1000;

/// A pool as the overview shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolUsage {
    pub pool: String,
    pub total_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    /// Bytes of the volumes storch created there (creating volumes not counted).
    pub used_bytes: u64,
    /// Bytes of creates under way whose plan tries this pool next.
    pub planned_bytes: u64,
    /// Volumes storch created there.
    pub volumes: u64,
}

/// A backend as the overview shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct BackendOverview {
    pub view: BackendView,
    pub pools: Vec<PoolUsage>,
}

/// Something an operator should look at, with up to [`ALERT_NAMES`] of the objects concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    /// `backend_failed`, `volume_deleting`, `volume_missing`.
    pub kind: &'static str,
    pub count: u64,
    pub names: Vec<String>,
    pub message: String,
}

/// The overview page.
#[derive(Debug, Clone, PartialEq)]
pub struct Overview {
    /// The sequence of the last event the projection holds.
    pub head: u64,
    /// `Some(leader)` on an etcd standby.
    pub standby_of: Option<String>,
    pub backends: Vec<BackendOverview>,
    pub classes: u64,
    pub volumes_by_state: BTreeMap<&'static str, u64>,
    pub volumes: u64,
    pub snapshots: u64,
    pub total_bytes: u64,
    pub used_bytes: u64,
    pub free_bytes: u64,
    pub planned_bytes: u64,
    pub alerts: Vec<Alert>,
}

/// A column of the volume table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VolumeColumn {
    #[default]
    Name,
    Class,
    Backend,
    Pool,
    Size,
    State,
    Protocol,
    Created,
}

impl VolumeColumn {
    pub const ALL: [(&'static str, VolumeColumn); 8] = [
        ("name", VolumeColumn::Name),
        ("class", VolumeColumn::Class),
        ("backend", VolumeColumn::Backend),
        ("pool", VolumeColumn::Pool),
        ("size", VolumeColumn::Size),
        ("state", VolumeColumn::State),
        ("protocol", VolumeColumn::Protocol),
        ("created", VolumeColumn::Created),
    ];

    pub fn parse(s: &str) -> Option<VolumeColumn> {
        Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, c)| *c)
    }
}

/// Which volumes, in which order, which page. Text filters match exactly except `name`, which
/// matches any volume whose name contains it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VolumeQuery {
    pub name: Option<String>,
    pub class: Option<String>,
    pub backend: Option<String>,
    pub pool: Option<String>,
    pub state: Option<VolumeState>,
    pub protocol: Option<Protocol>,
    pub sort: VolumeColumn,
    pub descending: bool,
    pub offset: usize,
    /// 1 to [`MAX_PAGE`].
    pub limit: usize,
}

/// One row of the volume table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeRow {
    pub name: String,
    pub class: String,
    pub backend: String,
    pub pool: String,
    pub size_bytes: u64,
    pub state: VolumeState,
    pub protocol: Protocol,
    pub clone_of: String,
    /// Unix milliseconds of the commit that recorded it created; `None` while creating.
    pub created_ms: Option<u64>,
}

/// A page of the volume table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumePage {
    /// Volumes matching the filters (all pages).
    pub matched: u64,
    /// Every volume.
    pub total: u64,
    pub rows: Vec<VolumeRow>,
}

/// One failed placement attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub backend: String,
    pub pool: String,
    pub reason: String,
}

/// The volume page, beside its event history (read from the log).
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeDetail {
    pub view: VolumeView,
    pub size_bytes: u64,
    /// Unix milliseconds of the commit that recorded it created; `None` while creating.
    pub created_ms: Option<u64>,
    /// The placement plan still to try, in order (empty once the outcome is known).
    pub candidates: Vec<(String, String)>,
    /// Candidates tried and failed during the placement under way.
    pub failed: Vec<Attempt>,
    pub delete_attempts: u32,
    pub snapshots: Vec<SnapshotView>,
    /// Volumes cloned from this one, sorted.
    pub clones: Vec<String>,
}

/// Where a class's volumes are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spread {
    pub backend: String,
    pub pool: String,
    pub volumes: u64,
    pub bytes: u64,
}

/// A class on the storage classes page.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassOverview {
    pub config: crate::model::StorageClassConfig,
    /// Every pool, with whether a create would try it and why not.
    pub explanation: Explanation,
    /// Created volumes of the class by pool, sorted by backend and pool.
    pub spread: Vec<Spread>,
    /// Volumes of the class not (yet) on a pool: creating ones.
    pub unplaced: u64,
}

/// A class's created volumes by (backend, pool) as (count, bytes), and its unplaced volumes.
type ClassSpread = (BTreeMap<(String, String), (u64, u64)>, u64);

/// Every class's [`ClassSpread`], by class name, in one pass that copies no string per
/// volume: counted by the interned class and pool first, named after.
fn class_spread(s: &State) -> HashMap<String, ClassSpread> {
    // class → (pool → (volumes, bytes), unplaced)
    type Counts<'s> = HashMap<&'s str, (HashMap<&'s PoolRef, (u64, u64)>, u64)>;
    let mut counts: Counts<'_> = HashMap::new();
    for v in s.volumes.values() {
        let entry = counts.entry(v.class()).or_default();
        match v.placement() {
            Some(p) if v.state != VolumeState::Creating => {
                let cell = entry.0.entry(p).or_default();
                cell.0 += 1;
                cell.1 += v.size_bytes;
            }
            _ => entry.1 += 1,
        }
    }
    counts
        .into_iter()
        .map(|(class, (pools, unplaced))| {
            let pools = pools
                .into_iter()
                .map(|(p, cell)| ((p.backend.clone(), p.pool.clone()), cell))
                .collect();
            (class.to_string(), (pools, unplaced))
        })
        .collect()
}

impl Core {
    /// The overview page: every backend with its pools' usage, totals and alerts.
    pub fn overview(&self) -> Result<Overview, CoreError> {
        self.shared.ensure_readable()?;
        let names: Vec<String> = self
            .shared
            .projection
            .read(|s| s.backends.keys().cloned().collect());
        let mut views = Vec::with_capacity(names.len());
        for name in &names {
            match self.get_backend(name) {
                Ok(view) => views.push(view),
                // Deleted between the two reads.
                Err(CoreError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let standby_of = self.shared.standby_leader();
        let mut overview = self.shared.projection.read(|s| usage(s, views));
        overview.standby_of = standby_of;
        Ok(overview)
    }

    /// A page of the volume table.
    pub fn volume_table(&self, query: &VolumeQuery) -> Result<VolumePage, CoreError> {
        self.shared.ensure_readable()?;
        if query.limit == 0 || query.limit > MAX_PAGE {
            return Err(CoreError::Invalid(format!(
                "limit: {} is not between 1 and {MAX_PAGE}",
                query.limit
            )));
        }
        Ok(self.shared.projection.read(|s| table(s, query)))
    }

    /// The volume page's data (its history comes from [`Core::events`] by object).
    pub fn volume_detail(&self, name: &str) -> Result<VolumeDetail, CoreError> {
        self.shared.ensure_readable()?;
        self.shared
            .projection
            .read(|s| {
                let rec = s.volumes.get(name)?;
                let view = s.volume_view(name)?;
                let mut clones: Vec<String> = s
                    .volumes
                    .iter()
                    .filter(|(_, v)| {
                        v.config_may_contain(name) && v.config().clone_source_volume == name
                    })
                    .map(|(n, _)| n.to_string())
                    .collect();
                clones.sort();
                Some(VolumeDetail {
                    view,
                    size_bytes: rec.size_bytes,
                    created_ms: rec.created_ms(),
                    candidates: rec
                        .candidates()
                        .iter()
                        .map(|p| (p.backend.clone(), p.pool.clone()))
                        .collect(),
                    failed: rec
                        .failed()
                        .iter()
                        .map(|(p, why)| Attempt {
                            backend: p.backend.clone(),
                            pool: p.pool.clone(),
                            reason: why.clone(),
                        })
                        .collect(),
                    delete_attempts: rec.delete_attempts(),
                    snapshots: s.snapshot_views(Some(name)).unwrap_or_default(),
                    clones,
                })
            })
            .ok_or_else(|| CoreError::NotFound(format!("volume {name} was not found")))
    }

    /// Every class with its explanation (any protocol, no size) and its volumes' spread.
    pub fn class_overview(&self) -> Result<Vec<ClassOverview>, CoreError> {
        self.shared.ensure_readable()?;
        let classes = self
            .shared
            .projection
            .read(|s| s.classes.clone())
            .into_iter();
        let mut spread = self.shared.projection.read(class_spread);
        let mut out = Vec::new();
        for (name, config) in classes {
            let explanation = match self.explain(&name, Protocol::Any, None) {
                Ok(e) => e,
                // Deleted meanwhile.
                Err(CoreError::NotFound(_)) => continue,
                Err(e) => return Err(e),
            };
            let (pools, unplaced) = spread.remove(&name).unwrap_or_default();
            out.push(ClassOverview {
                config,
                explanation,
                spread: pools
                    .into_iter()
                    .map(|((backend, pool), (volumes, bytes))| Spread {
                        backend,
                        pool,
                        volumes,
                        bytes,
                    })
                    .collect(),
                unplaced,
            });
        }
        Ok(out)
    }

    /// Walks the event log's hash chain from the first record (a blocking read, off the
    /// runtime's threads).
    pub async fn verify_log(&self) -> Result<VerifyReport, CoreError> {
        self.shared.ensure_readable()?;
        let log = self.shared.log().ok_or(CoreError::NotReady)?;
        tokio::task::spawn_blocking(move || log.verify())
            .await
            .map_err(|e| CoreError::Internal(e.to_string()))
    }
}

/// The overview's numbers from the state, for backends as the core sees them (on a standby: as
/// the leader recorded them, so a standby alerts on the backends the leader saw fail).
fn usage(s: &State, views: Vec<BackendView>) -> Overview {
    // (backend, pool) → (used, planned, volumes)
    let mut per_pool: BTreeMap<(&str, &str), (u64, u64, u64)> = BTreeMap::new();
    let mut by_state: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut deleting = (0u64, Vec::new());
    let mut missing = (0u64, Vec::new());
    let mut snapshots = 0u64;
    for (name, v) in s.volumes.iter() {
        *by_state.entry(v.state.as_str()).or_default() += 1;
        snapshots += v.snapshots().len() as u64;
        match v.state {
            VolumeState::Creating => {
                let failed = v.failed();
                let next = v
                    .candidates()
                    .iter()
                    .find(|c| !failed.iter().any(|(f, _)| f == *c));
                if let Some(p) = next {
                    per_pool
                        .entry((p.backend.as_str(), p.pool.as_str()))
                        .or_default()
                        .1 += v.size_bytes;
                }
                continue;
            }
            VolumeState::Deleting => note(&mut deleting, name),
            VolumeState::Missing => note(&mut missing, name),
            VolumeState::Online => {}
        }
        let cell = per_pool.entry((v.backend(), v.pool())).or_default();
        cell.0 += v.size_bytes;
        cell.2 += 1;
    }
    let mut overview = Overview {
        head: s.head,
        standby_of: None,
        backends: Vec::new(),
        classes: s.classes.len() as u64,
        volumes_by_state: by_state,
        volumes: s.volumes.len() as u64,
        snapshots,
        total_bytes: 0,
        used_bytes: 0,
        free_bytes: 0,
        planned_bytes: 0,
        alerts: Vec::new(),
    };
    let mut failed = (0u64, Vec::new());
    for view in views {
        if let BackendState::Failed(_) = view.state {
            note(&mut failed, &view.name);
        }
        let pools = view
            .pools
            .iter()
            .map(|p| {
                let (used, planned, volumes) = per_pool
                    .get(&(view.name.as_str(), p.name.as_str()))
                    .copied()
                    .unwrap_or_default();
                overview.total_bytes += p.total_bytes.unwrap_or(0);
                overview.free_bytes += p.free_bytes.unwrap_or(0);
                overview.used_bytes += used;
                overview.planned_bytes += planned;
                PoolUsage {
                    pool: p.name.clone(),
                    total_bytes: p.total_bytes,
                    free_bytes: p.free_bytes,
                    used_bytes: used,
                    planned_bytes: planned,
                    volumes,
                }
            })
            .collect();
        overview.backends.push(BackendOverview { view, pools });
    }
    let alerts = [
        ("backend_failed", failed, "backends have failed"),
        (
            "volume_deleting",
            deleting,
            "volumes are being deleted (a failed delete is retried)",
        ),
        (
            "volume_missing",
            missing,
            "volumes are missing on their array",
        ),
    ];
    for (kind, (count, mut names), what) in alerts {
        if count > 0 {
            names.sort();
            overview.alerts.push(Alert {
                kind,
                count,
                names,
                message: format!("{count} {what}"),
            });
        }
    }
    overview
}

fn note(alert: &mut (u64, Vec<String>), name: &str) {
    alert.0 += 1;
    if alert.1.len() < ALERT_NAMES {
        alert.1.push(name.to_string());
    }
}

fn table(s: &State, q: &VolumeQuery) -> VolumePage {
    // Every filter and order reads the record's plain fields: no config is decoded but the
    // page's own rows'.
    let mut hits: Vec<(&str, &VolumeRecord)> = s
        .volumes
        .iter()
        .filter(|(name, rec)| {
            q.name.as_deref().is_none_or(|n| name.contains(n))
                && q.class.as_deref().is_none_or(|c| rec.class() == c)
                && q.backend.as_deref().is_none_or(|b| rec.backend() == b)
                && q.pool.as_deref().is_none_or(|p| rec.pool() == p)
                && q.state.is_none_or(|st| rec.state == st)
                && q.protocol.is_none_or(|p| rec.protocol == p)
        })
        .collect();
    let matched = hits.len();
    let order = |(a_name, a): &(&str, &VolumeRecord), (b_name, b): &(&str, &VolumeRecord)| {
        let by = match q.sort {
            VolumeColumn::Name => Ordering::Equal,
            VolumeColumn::Class => a.class().cmp(b.class()),
            VolumeColumn::Backend => a.backend().cmp(b.backend()),
            VolumeColumn::Pool => (a.pool(), a.backend()).cmp(&(b.pool(), b.backend())),
            VolumeColumn::Size => a.size_bytes.cmp(&b.size_bytes),
            VolumeColumn::State => a.state.as_str().cmp(b.state.as_str()),
            VolumeColumn::Protocol => a.protocol.as_str().cmp(b.protocol.as_str()),
            // Not yet created (none) sorts first.
            VolumeColumn::Created => a.created_ms().cmp(&b.created_ms()),
        };
        let by = if q.descending { by.reverse() } else { by };
        // Names break ties, in the same direction, so every order is total and stable
        // across pages.
        by.then_with(|| {
            let n = a_name.cmp(b_name);
            if q.descending { n.reverse() } else { n }
        })
    };
    let end = q.offset.saturating_add(q.limit).min(matched);
    let rows = if q.offset >= matched {
        Vec::new()
    } else {
        // Only the first `end` in order matter: partition there, then sort that prefix.
        if end < matched {
            hits.select_nth_unstable_by(end, order);
            hits.truncate(end);
        }
        hits.sort_unstable_by(order);
        hits.drain(q.offset..end)
            .map(|(name, rec)| VolumeRow {
                name: name.to_string(),
                class: rec.class().to_string(),
                backend: rec.backend().to_string(),
                pool: rec.pool().to_string(),
                size_bytes: rec.size_bytes,
                state: rec.state,
                protocol: rec.protocol,
                clone_of: rec.config().clone_source_volume,
                created_ms: rec.created_ms(),
            })
            .collect()
    };
    VolumePage {
        matched: matched as u64,
        total: s.volumes.len() as u64,
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{Event, VolumeEvent};
    use crate::model::{AccessInfo, PoolRef, VolumeConfig};
    use crate::projections::{BackendState, PoolView};

    /// A state with volumes `(name, class, pool, size in GiB, protocol, created?)` on
    /// backend `b`.
    fn state(volumes: &[(&str, &str, &str, u64, Protocol, bool)]) -> State {
        let mut s = State::default();
        let mut seq = 0;
        let mut apply = |s: &mut State, e: Event| {
            seq += 1;
            // Committed a second apart.
            s.apply(seq, seq * 1000, &e);
        };
        for &(name, class, pool, gib, protocol, created) in volumes {
            let config = VolumeConfig {
                name: name.to_string(),
                size: format!("{gib}Gi"),
                storage_class: class.to_string(),
                protocol,
                ..Default::default()
            };
            apply(
                &mut s,
                Event::volume(
                    name,
                    VolumeEvent::Requested {
                        config: Box::new(config),
                        size_bytes: gib << 30,
                    },
                ),
            );
            apply(
                &mut s,
                Event::volume(
                    name,
                    VolumeEvent::PlacementPlanned {
                        candidates: vec![PoolRef::new("b", pool), PoolRef::new("b", "other")],
                        seed: 0,
                    },
                ),
            );
            if created {
                apply(
                    &mut s,
                    Event::volume(
                        name,
                        VolumeEvent::Created {
                            pool: PoolRef::new("b", pool),
                            internal_name: format!("i-{name}"),
                            protocol,
                            access: Box::new(AccessInfo::default()),
                            secrets: None,
                            adopted: false,
                        },
                    ),
                );
            }
        }
        s
    }

    fn sample() -> State {
        state(&[
            ("c-vol", "gold", "p1", 3, Protocol::File, true),
            ("a-vol", "bronze", "p2", 1, Protocol::Block, true),
            ("b-vol", "gold", "p1", 2, Protocol::File, true),
            ("d-new", "gold", "p2", 5, Protocol::File, false),
        ])
    }

    fn query(f: impl FnOnce(&mut VolumeQuery)) -> VolumeQuery {
        let mut q = VolumeQuery {
            limit: 50,
            ..VolumeQuery::default()
        };
        f(&mut q);
        q
    }

    fn names(page: &VolumePage) -> Vec<&str> {
        page.rows.iter().map(|r| r.name.as_str()).collect()
    }

    #[test]
    fn the_table_sorts_by_every_column_with_names_breaking_ties() {
        let s = sample();
        let page = table(&s, &query(|_| {}));
        assert_eq!(names(&page), ["a-vol", "b-vol", "c-vol", "d-new"]);
        assert_eq!((page.matched, page.total), (4, 4));
        let row = &page.rows[0];
        assert_eq!(
            (row.class.as_str(), row.backend.as_str(), row.pool.as_str()),
            ("bronze", "b", "p2")
        );
        assert_eq!((row.size_bytes, row.protocol), (1 << 30, Protocol::Block));
        let by = |sort, descending| {
            let page = table(
                &s,
                &query(|q| {
                    q.sort = sort;
                    q.descending = descending;
                }),
            );
            names(&page)
                .into_iter()
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            by(VolumeColumn::Size, false),
            ["a-vol", "b-vol", "c-vol", "d-new"]
        );
        assert_eq!(
            by(VolumeColumn::Size, true),
            ["d-new", "c-vol", "b-vol", "a-vol"]
        );
        assert_eq!(
            by(VolumeColumn::Class, false),
            ["a-vol", "b-vol", "c-vol", "d-new"]
        );
        // the creating volume has no backend yet: it sorts first
        assert_eq!(
            by(VolumeColumn::Backend, false),
            ["d-new", "a-vol", "b-vol", "c-vol"]
        );
        assert_eq!(
            by(VolumeColumn::Pool, true),
            ["a-vol", "c-vol", "b-vol", "d-new"]
        );
        assert_eq!(
            by(VolumeColumn::State, false),
            ["d-new", "a-vol", "b-vol", "c-vol"]
        );
        assert_eq!(
            by(VolumeColumn::Protocol, false),
            ["a-vol", "b-vol", "c-vol", "d-new"]
        );
        assert_eq!(
            by(VolumeColumn::Name, true),
            ["d-new", "c-vol", "b-vol", "a-vol"]
        );
        // In the order they were created; the one still creating has no time and sorts first.
        assert_eq!(
            by(VolumeColumn::Created, false),
            ["d-new", "c-vol", "a-vol", "b-vol"]
        );
        assert_eq!(
            by(VolumeColumn::Created, true),
            ["b-vol", "a-vol", "c-vol", "d-new"]
        );
    }

    #[test]
    fn a_row_shows_when_its_volume_was_created_as_the_fold_recorded_it() {
        let s = sample();
        let page = table(&s, &query(|_| {}));
        let created: Vec<(&str, Option<u64>)> = page
            .rows
            .iter()
            .map(|r| (r.name.as_str(), r.created_ms))
            .collect();
        // Three events per created volume, a second apart: c-vol's `VolumeCreated` is the
        // third, a-vol's the sixth, b-vol's the ninth.
        assert_eq!(
            created,
            [
                ("a-vol", Some(6000)),
                ("b-vol", Some(9000)),
                ("c-vol", Some(3000)),
                ("d-new", None),
            ]
        );
        assert_eq!(
            created[0].1,
            s.volumes["a-vol"].created_ms(),
            "the record's time"
        );
    }

    #[test]
    fn the_table_filters_and_pages() {
        let s = sample();
        let rec = s.volumes.get("c-vol").unwrap();
        assert!(rec.config_may_contain("gold") && rec.config_may_contain("c-vol"));
        assert!(!rec.config_may_contain("bronze"));
        let page = table(&s, &query(|q| q.class = Some("gold".into())));
        assert_eq!(names(&page), ["b-vol", "c-vol", "d-new"]);
        assert_eq!((page.matched, page.total), (3, 4));
        let page = table(&s, &query(|q| q.name = Some("-vol".into())));
        assert_eq!(names(&page), ["a-vol", "b-vol", "c-vol"]);
        let page = table(&s, &query(|q| q.pool = Some("p1".into())));
        assert_eq!(names(&page), ["b-vol", "c-vol"]);
        let page = table(&s, &query(|q| q.state = Some(VolumeState::Creating)));
        assert_eq!(names(&page), ["d-new"]);
        let page = table(&s, &query(|q| q.protocol = Some(Protocol::Block)));
        assert_eq!(names(&page), ["a-vol"]);
        let page = table(&s, &query(|q| q.backend = Some("nope".into())));
        assert_eq!((page.matched, page.rows.len()), (0, 0));
        // pages: every row once, in order
        let mut seen = Vec::new();
        for offset in [0, 2, 4] {
            let page = table(
                &s,
                &query(|q| {
                    q.offset = offset;
                    q.limit = 2;
                    q.sort = VolumeColumn::Size;
                    q.descending = true;
                }),
            );
            assert_eq!(page.matched, 4);
            seen.extend(page.rows.into_iter().map(|r| r.name));
        }
        assert_eq!(seen, ["d-new", "c-vol", "b-vol", "a-vol"]);
    }

    #[test]
    fn the_class_spread_counts_placed_volumes_per_pool_and_creating_ones_apart() {
        let spread = class_spread(&sample());
        let gold = &spread["gold"];
        assert_eq!(
            gold.0.iter().collect::<Vec<_>>(),
            [(&("b".to_string(), "p1".to_string()), &(2, 5 << 30))]
        );
        assert_eq!(gold.1, 1, "d-new is still creating");
        let bronze = &spread["bronze"];
        assert_eq!(
            bronze.0.iter().collect::<Vec<_>>(),
            [(&("b".to_string(), "p2".to_string()), &(1, 1 << 30))]
        );
        assert_eq!((bronze.1, spread.len()), (0, 2));
    }

    #[test]
    fn a_large_table_pages_the_same_as_a_full_sort() {
        let volumes: Vec<(String, u64)> = (0..500u64)
            .map(|i| (format!("v{:03}", (i * 7919) % 500), i % 13))
            .collect();
        let specs: Vec<(&str, &str, &str, u64, Protocol, bool)> = volumes
            .iter()
            .map(|(n, g)| (n.as_str(), "c", "p1", *g + 1, Protocol::File, true))
            .collect();
        let s = state(&specs);
        let mut all: Vec<(u64, String)> = volumes
            .iter()
            .map(|(n, g)| ((g + 1) << 30, n.clone()))
            .collect();
        all.sort();
        let mut paged = Vec::new();
        for offset in (0..500).step_by(37) {
            let page = table(
                &s,
                &query(|q| {
                    q.offset = offset;
                    q.limit = 37;
                    q.sort = VolumeColumn::Size;
                }),
            );
            paged.extend(page.rows.into_iter().map(|r| (r.size_bytes, r.name)));
        }
        assert_eq!(paged, all);
    }

    #[test]
    fn usage_counts_used_planned_and_alerts_per_pool() {
        let mut s = sample();
        let seq = s.head;
        s.apply(
            seq + 1,
            (seq + 1) * 1000,
            &Event::volume("b-vol", VolumeEvent::DeleteRequested),
        );
        let pool = |name: &str| PoolView {
            name: name.into(),
            storage_classes: Vec::new(),
            offers: Default::default(),
            total_bytes: Some(100 << 30),
            free_bytes: Some(90 << 30),
            topology: Vec::new(),
        };
        let view = BackendView {
            name: "b".into(),
            driver: "fake".into(),
            protocol: Protocol::Any,
            config: serde_json::Value::Null,
            pools: vec![pool("p1"), pool("p2")],
            online: true,
            state: BackendState::Failed("array unreachable".into()),
            volumes: vec!["a-vol".into(), "b-vol".into(), "c-vol".into()],
            user_state: Default::default(),
            observed_ms: None,
        };
        let o = usage(&s, vec![view]);
        assert_eq!(o.volumes, 4);
        let p1 = &o.backends[0].pools[0];
        assert_eq!(
            (p1.used_bytes, p1.planned_bytes, p1.volumes),
            (5 << 30, 0, 2)
        );
        let p2 = &o.backends[0].pools[1];
        assert_eq!(
            (p2.used_bytes, p2.planned_bytes, p2.volumes),
            (1 << 30, 5 << 30, 1)
        );
        assert_eq!(o.used_bytes, 6 << 30);
        assert_eq!(o.planned_bytes, 5 << 30);
        assert_eq!(o.total_bytes, 200 << 30);
        assert_eq!(o.volumes_by_state["creating"], 1);
        let kinds: Vec<(&str, u64, Vec<String>)> = o
            .alerts
            .iter()
            .map(|a| (a.kind, a.count, a.names.clone()))
            .collect();
        assert_eq!(
            kinds,
            [
                ("backend_failed", 1, vec!["b".to_string()]),
                ("volume_deleting", 1, vec!["b-vol".to_string()]),
            ]
        );
    }
}
