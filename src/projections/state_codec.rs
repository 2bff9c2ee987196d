//! The checkpoint encoding of a [`State`] (state format 7), laid out so that the volume table
//! — nearly all of a large state — decodes on every core.
//!
//! Layout (bincode 2 `config::standard()` throughout; `State::encode` puts the magic byte and
//! the format before it):
//!
//! ```text
//! meta    (head, backends, classes, declared classes, pools, volume classes, chunks)
//!           backends: their records without volume sets; pools: every pool a volume is
//!           placed on, once; volume classes: every class name a volume has, once; chunks:
//!           (byte length, volume count) of each chunk
//! chunk*  the volumes in name order; per volume: name, config bytes, size, state, orphaned,
//!           bound, protocol, class (0 = none, else 1 + its index in volume classes), creation time
//!           (an option), placement (0 = none, else 1 + its index in pools), set (0 =
//!           none, else 1 + the position among the backends of the one it is placed on, whose
//!           set holds it), extras
//! others  per backend, in the order of `backends`: the names in its set that the volumes'
//!           own `set` fields do not cover (none, short of a log written by a buggy build)
//! ```
//!
//! Chunks decode on their own (they need only the pool and class tables), a round of them at a time on
//! every core; then this thread moves a round into the map and the backends' sets (in name
//! order, so each set grows at its end) and the next round reuses the memory. Names are
//! allocated once and shared between the map and the sets, placements once per pool and class
//! names once per class, as the fold does.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::num::NonZeroU64;
use std::sync::Arc;

use bincode::de::{BorrowDecode, BorrowDecoder, Decode};
use bincode::error::DecodeError;

use super::{
    BackendRecord, Interned, State, VolumeExtra, VolumeNames, VolumeRecord, VolumeState, Volumes,
};
use crate::model::{PoolRef, Protocol, StorageClassConfig};

/// Volumes per chunk: large enough that a chunk's bookkeeping is noise, small enough that a
/// million volumes split evenly over the cores.
const CHUNK_VOLUMES: usize = if cfg!(test) { 3 } else { 32 * 1024 };

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

type Meta = (
    u64,
    BTreeMap<String, BackendRecord>,
    BTreeMap<String, StorageClassConfig>,
    BTreeMap<String, String>,
    Vec<PoolRef>,
    Vec<String>,
    Vec<(u64, u64)>,
);

type Others = Vec<Vec<String>>;

fn put(out: &mut Vec<u8>, value: impl bincode::Encode) {
    bincode::encode_into_std_write(value, out, config()).expect("encoding to a Vec cannot fail");
}

pub(super) fn encode(state: &State, out: &mut Vec<u8>) {
    let position: HashMap<&str, u32> = state
        .backends
        .keys()
        .enumerate()
        .map(|(i, b)| (b.as_str(), i as u32))
        .collect();
    // The backend whose set the volume's own `set` field puts it in, if any.
    let member = |name: &str, v: &VolumeRecord| {
        state
            .backends
            .get_key_value(v.backend())
            .filter(|(_, b)| b.volumes.contains(name))
            .map(|(b, _)| position[b.as_str()])
    };
    let mut pools: Vec<&PoolRef> = Vec::new();
    let mut pool_index: HashMap<*const PoolRef, u32> = HashMap::new();
    let mut classes: Vec<&str> = Vec::new();
    let mut class_index: HashMap<&str, u32> = HashMap::new();
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    let mut counts: Vec<(u64, u64)> = Vec::new();
    let mut volumes: Vec<(&str, &VolumeRecord)> = state.volumes.iter().collect();
    volumes.sort_unstable_by_key(|(n, _)| *n);
    for group in volumes.chunks(CHUNK_VOLUMES) {
        let mut chunk = Vec::with_capacity(group.len() * 128);
        for (name, v) in group {
            let placed = v.placed.as_ref().map_or(0, |p| {
                1 + *pool_index.entry(Arc::as_ptr(p)).or_insert_with(|| {
                    pools.push(p);
                    pools.len() as u32 - 1
                })
            });
            let class = v.class.as_deref().map_or(0, |c| {
                1 + *class_index.entry(c).or_insert_with(|| {
                    classes.push(c);
                    classes.len() as u32 - 1
                })
            });
            let set = member(name, v).map_or(0, |i| i + 1);
            put(
                &mut chunk,
                (
                    *name,
                    &*v.config,
                    v.size_bytes,
                    v.state,
                    v.orphaned,
                    v.bound,
                    v.protocol,
                    class,
                    v.created_ms(),
                    placed,
                    set,
                    &v.extra,
                ),
            );
        }
        counts.push((chunk.len() as u64, group.len() as u64));
        chunks.push(chunk);
    }
    let others: Vec<Vec<&str>> = state
        .backends
        .iter()
        .map(|(b, record)| {
            record
                .volumes
                .iter()
                .filter(|name| {
                    let covered = state.volumes.get(name).and_then(|v| member(name, v));
                    covered != Some(position[b.as_str()])
                })
                .collect()
        })
        .collect();
    put(
        out,
        (
            state.head,
            &state.backends,
            &state.classes,
            &state.declared_classes,
            &pools,
            &classes,
            &counts,
        ),
    );
    for chunk in &chunks {
        out.extend_from_slice(chunk);
    }
    put(out, &others);
}

/// What a chunk decoder needs: the pool and class tables and how many volumes the chunk holds.
struct ChunkContext<'p> {
    pools: &'p [Arc<PoolRef>],
    classes: &'p [Arc<str>],
    count: usize,
}

/// Each volume with its `set` field.
struct Chunk(Vec<(Arc<str>, Box<VolumeRecord>, u32)>);

impl<'de, 'p> BorrowDecode<'de, ChunkContext<'p>> for Chunk {
    fn borrow_decode<D: BorrowDecoder<'de, Context = ChunkContext<'p>>>(
        d: &mut D,
    ) -> Result<Self, DecodeError> {
        let count = d.context().count;
        d.claim_container_read::<(Arc<str>, Box<VolumeRecord>, u32)>(count)?;
        let mut volumes = Vec::with_capacity(count);
        for _ in 0..count {
            let name: &str = BorrowDecode::borrow_decode(d)?;
            let config: &[u8] = BorrowDecode::borrow_decode(d)?;
            let size_bytes = u64::decode(d)?;
            let state = VolumeState::decode(d)?;
            let orphaned = bool::decode(d)?;
            let bound = bool::decode(d)?;
            let protocol = Protocol::decode(d)?;
            let i = u32::decode(d)?;
            let class = entry(d.context().classes, i, "a class the table lacks")?;
            // No commit is at the epoch: a 0 (which `encode` never writes) is "not created".
            let created_ms = Option::<u64>::decode(d)?.and_then(NonZeroU64::new);
            let i = u32::decode(d)?;
            let placed = entry(d.context().pools, i, "placement on a pool the table lacks")?;
            let set = u32::decode(d)?;
            let extra = Option::<Box<VolumeExtra>>::decode(d)?;
            let record = VolumeRecord {
                config: config.into(),
                size_bytes,
                state,
                orphaned,
                bound,
                protocol,
                class,
                created_ms,
                placed,
                extra,
            };
            volumes.push((Arc::from(name), Box::new(record), set));
        }
        Ok(Chunk(volumes))
    }
}

/// The pool and class tables every chunk refers to.
type Tables<'t> = (&'t [Arc<PoolRef>], &'t [Arc<str>]);

/// What index `i` of a volume names in `table`: nothing for 0, else entry `i - 1`.
fn entry<T: Clone>(table: &[T], i: u32, lacking: &'static str) -> Result<Option<T>, DecodeError> {
    match i {
        0 => Ok(None),
        i => table
            .get(i as usize - 1)
            .cloned()
            .map(Some)
            .ok_or(DecodeError::Other(lacking)),
    }
}

fn decode_chunk(bytes: &[u8], (pools, classes): Tables<'_>, count: usize) -> Result<Chunk, String> {
    let (chunk, used) = bincode::borrow_decode_from_slice_with_context::<_, Chunk, _>(
        bytes,
        config(),
        ChunkContext {
            pools,
            classes,
            count,
        },
    )
    .map_err(|e| format!("a volume chunk does not decode: {e}"))?;
    if used != bytes.len() {
        return Err(format!("{} bytes after a volume chunk", bytes.len() - used));
    }
    Ok(chunk)
}

/// Decodes a round of chunks, one per thread (this one included), in order.
fn decode_round(round: &[(&[u8], usize)], tables: Tables<'_>) -> Result<Vec<Chunk>, String> {
    let Some(((bytes, count), rest)) = round.split_first() else {
        return Ok(Vec::new());
    };
    std::thread::scope(|s| {
        let others: Vec<_> = rest
            .iter()
            .map(|(bytes, count)| s.spawn(move || decode_chunk(bytes, tables, *count)))
            .collect();
        let mut all = vec![decode_chunk(bytes, tables, *count)?];
        for handle in others {
            let chunk = handle
                .join()
                .map_err(|_| "a checkpoint decoding thread panicked".to_string())??;
            all.push(chunk);
        }
        Ok(all)
    })
}

pub(super) fn decode(body: &[u8]) -> Result<State, String> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    decode_on(body, threads)
}

fn decode_on(body: &[u8], threads: usize) -> Result<State, String> {
    let ((head, mut backends, classes, declared_classes, pools, volume_classes, counts), mut at): (
        Meta,
        usize,
    ) = bincode::decode_from_slice(body, config()).map_err(|e| e.to_string())?;
    let pools: Vec<Arc<PoolRef>> = pools.into_iter().map(Arc::new).collect();
    let volume_classes: Vec<Arc<str>> = volume_classes.into_iter().map(Arc::from).collect();
    let mut chunks = Vec::with_capacity(counts.len());
    let mut total = 0usize;
    for (len, count) in counts {
        let len = usize::try_from(len).map_err(|_| "a volume chunk is too long".to_string())?;
        let count = usize::try_from(count).map_err(|_| "too many volumes".to_string())?;
        // Every volume takes several bytes: a count larger than the chunk is a lie.
        if len > body.len() - at || count > len {
            return Err("a volume chunk runs past the end of the state".into());
        }
        chunks.push((&body[at..at + len], count));
        at += len;
        total += count;
    }
    let others_at = at;
    let (others, used): (Others, usize) =
        bincode::decode_from_slice(&body[others_at..], config()).map_err(|e| e.to_string())?;
    if others_at + used != body.len() {
        return Err(format!(
            "{} bytes after the encoded state",
            body.len() - others_at - used
        ));
    }
    if others.len() != backends.len() {
        return Err("the volume sets do not match the backends".into());
    }

    let mut map = HashMap::with_capacity(total);
    let mut sets: Vec<BTreeSet<Arc<str>>> = vec![BTreeSet::new(); backends.len()];
    for round in chunks.chunks(threads.max(1)) {
        for chunk in decode_round(round, (&pools, &volume_classes))? {
            for (name, record, set) in chunk.0 {
                if let Some(i) = set.checked_sub(1) {
                    sets.get_mut(i as usize)
                        .ok_or_else(|| "a volume is in the set of no backend".to_string())?
                        .insert(name.clone());
                }
                if map.insert(name, record).is_some() {
                    return Err("a volume appears twice in the state".into());
                }
            }
        }
    }
    for ((backend, mut set), names) in backends.values_mut().zip(sets).zip(others) {
        set.extend(names.into_iter().map(Arc::from));
        backend.volumes = VolumeNames(set);
    }
    Ok(State {
        head,
        backends,
        classes,
        declared_classes,
        volumes: Volumes(map),
        interned: Interned {
            pools: pools.into_iter().collect(),
            classes: volume_classes.into_iter().collect(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{BackendEvent, Event, VolumeEvent};
    use crate::model::{AccessInfo, Protocol, VolumeConfig};

    /// Two backends, volumes on three pools over several chunks, one still creating, one with
    /// a snapshot, one deleted, one in both backends' sets.
    fn state() -> State {
        let mut s = State::default();
        let mut seq = 0;
        let mut apply = |s: &mut State, e: Event| {
            seq += 1;
            s.apply(seq, 1_700_000_000_000 + seq, &e);
        };
        for b in ["b1", "b2"] {
            apply(
                &mut s,
                Event::backend(
                    b,
                    BackendEvent::Added {
                        driver: "fake".into(),
                        config: "{}".into(),
                        secrets: None,
                    },
                ),
            );
        }
        for i in 0..11 {
            let name = format!("v{i:02}");
            let pool = PoolRef::new(["b1", "b2"][i % 2], ["p1", "p2", "p3"][i % 3]);
            apply(
                &mut s,
                Event::volume(
                    &name,
                    VolumeEvent::Requested {
                        config: Box::new(VolumeConfig {
                            name: name.clone(),
                            size: "1Gi".into(),
                            storage_class: ["gold", "silver", ""][i % 3].into(),
                            ..Default::default()
                        }),
                        size_bytes: 1 << 30,
                    },
                ),
            );
            apply(
                &mut s,
                Event::volume(
                    &name,
                    VolumeEvent::PlacementPlanned {
                        candidates: vec![pool.clone()],
                        seed: i as u64,
                    },
                ),
            );
            if i == 7 {
                continue;
            }
            apply(
                &mut s,
                Event::volume(
                    &name,
                    VolumeEvent::Created {
                        pool,
                        internal_name: format!("trident-{name}"),
                        protocol: Protocol::File,
                        access: Box::new(AccessInfo::default()),
                        secrets: None,
                        adopted: false,
                    },
                ),
            );
        }
        apply(
            &mut s,
            Event::volume(
                "v03",
                VolumeEvent::SnapshotRequested {
                    snapshot: "s1".into(),
                },
            ),
        );
        apply(&mut s, Event::volume("v04", VolumeEvent::Deleted));
        // Adopted on a second backend: now placed on b1, and still in b2's set too.
        apply(
            &mut s,
            Event::volume(
                "v01",
                VolumeEvent::Created {
                    pool: PoolRef::new("b1", "p1"),
                    internal_name: "trident-v01".into(),
                    protocol: Protocol::File,
                    access: Box::new(AccessInfo::default()),
                    secrets: None,
                    adopted: true,
                },
            ),
        );
        assert!(s.backends["b2"].volumes.contains("v01"));
        s
    }

    /// Where the other names start in an encoded body.
    fn others_at(body: &[u8]) -> usize {
        let ((.., counts), at): (Meta, usize) = bincode::decode_from_slice(body, config()).unwrap();
        at + counts.iter().map(|(len, _)| *len as usize).sum::<usize>()
    }

    #[test]
    fn a_state_over_several_chunks_round_trips_on_any_number_of_threads() {
        let s = state();
        let bytes = s.encode();
        let body = &bytes[2..];
        let ((.., counts), _): (Meta, usize) = bincode::decode_from_slice(body, config()).unwrap();
        assert_eq!(counts.len(), 4, "10 volumes, 3 per chunk");
        for threads in [1, 2, 3, 4, 5, 8] {
            assert_eq!(decode_on(body, threads).unwrap(), s, "{threads} threads");
        }
        let back = State::decode(&bytes).unwrap();
        assert_eq!(back, s);
        for (name, v) in &back.volumes.0 {
            if let Some(b) = back.backends.get(v.backend()) {
                let in_set = b.volumes.0.get(&**name).unwrap();
                assert!(Arc::ptr_eq(name, in_set), "{name} is stored once");
            }
        }
        let (a, b) = (&back.volumes["v00"].placed, &back.volumes["v06"].placed);
        assert!(Arc::ptr_eq(a.as_ref().unwrap(), b.as_ref().unwrap()));
        assert_eq!(back.interned.pools.len(), 5);
        // Classes: shared again, one per name; none for an empty one.
        let (a, b) = (&back.volumes["v00"].class, &back.volumes["v03"].class);
        assert!(Arc::ptr_eq(a.as_ref().unwrap(), b.as_ref().unwrap()));
        assert_eq!(back.volumes["v00"].class(), "gold");
        assert_eq!(back.volumes["v01"].class(), "silver");
        assert!(back.volumes["v02"].class.is_none());
        assert_eq!(back.interned.classes.len(), 2);
        // Protocol and creation time as the fold left them; none for the one still creating.
        assert_eq!(back.volumes["v00"].protocol, Protocol::File);
        assert_eq!(
            back.volumes["v00"].created_ms(),
            s.volumes["v00"].created_ms()
        );
        assert!(back.volumes["v00"].created_ms().is_some());
        assert_eq!(back.volumes["v07"].created_ms(), None);
        assert_eq!(back.volumes["v03"].snapshots().len(), 1);
        assert!(back.volumes["v07"].placed.is_none());
        assert!(!back.volumes.contains_key("v04"));
        assert_eq!(back.backends["b1"].volumes.len(), 6);
        assert_eq!(back.backends["b2"].volumes.len(), 4);
    }

    #[test]
    fn a_damaged_or_truncated_state_is_refused() {
        let bytes = state().encode();
        let body = &bytes[2..];
        for n in 0..body.len() {
            assert!(decode(&body[..n]).is_err(), "truncated to {n}");
        }
        let mut longer = body.to_vec();
        longer.push(0);
        assert!(decode(&longer).is_err());
        // A flipped byte anywhere fails or decodes to some other state; it never panics.
        for i in 0..body.len() {
            let mut damaged = body.to_vec();
            damaged[i] ^= 0x55;
            let _ = decode(&damaged);
        }
    }

    #[test]
    fn a_volume_twice_or_a_set_member_out_of_range_is_refused() {
        let mut s = State::default();
        s.apply(
            1,
            1_700_000_000_000,
            &Event::volume(
                "v",
                VolumeEvent::Requested {
                    config: Box::default(),
                    size_bytes: 1,
                },
            ),
        );
        let one = s.encode();
        let ((head, backends, classes, declared, pools, volume_classes, counts), at): (
            Meta,
            usize,
        ) = bincode::decode_from_slice(&one[2..], config()).unwrap();
        let chunk = &one[2 + at..2 + at + counts[0].0 as usize];
        let mut twice = Vec::new();
        put(
            &mut twice,
            (
                head,
                &backends,
                &classes,
                &declared,
                &pools,
                &volume_classes,
                vec![counts[0], counts[0]],
            ),
        );
        twice.extend_from_slice(chunk);
        twice.extend_from_slice(chunk);
        put(&mut twice, Others::new());
        assert!(decode(&twice).unwrap_err().contains("twice"));

        // Other names that do not match the backends.
        let bytes = state().encode();
        let body = &bytes[2..];
        let at = others_at(body);
        let mut bad = body[..at].to_vec();
        put(&mut bad, Others::new());
        assert!(decode(&bad).unwrap_err().contains("do not match"));
        // A set may hold a name that has no volume (kept as a name).
        let mut odd = body[..at].to_vec();
        put(&mut odd, vec![vec!["gone".to_string()], Vec::new()]);
        let back = decode(&odd).unwrap();
        assert!(back.backends["b1"].volumes.contains("gone"));
        assert_eq!(back.backends["b1"].volumes.len(), 7);
        // And such a name round-trips.
        assert_eq!(State::decode(&back.encode()).unwrap(), back);
    }
}
