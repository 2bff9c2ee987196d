//! Bounding etcd's history: the leader's checkpoint in etcd.
//!
//! Every `checkpoint_every` records the leader stores its projection (the encoded `State`)
//! under `<prefix>/checkpoint-parts/<sequence>/<part>` (parts of at most [`PART_BYTES`], one
//! fenced transaction each), then, in one fenced transaction, points `<prefix>/checkpoint` at
//! it (sequence, the hash of the record at that sequence, size and SHA-256 of the state) and
//! deletes the older checkpoint's parts and every chunk before the *previous* checkpoint's
//! boundary. Last it compacts etcd's revisions up to that transaction, so that the deleted
//! chunks stop taking space. etcd thus holds one checkpoint and the records since the one
//! before it: a standby that lags by less than a checkpoint interval keeps following record
//! by record; one that is further behind, or joins with an empty log, starts its log from the
//! checkpoint (see [`crate::log::Anchor`]) and follows the tail.

use sha2::{Digest, Sha256};

use super::etcd::{Compare, Op, prefix_end};
use super::{Node, ReplicationError};
use crate::log::{Anchor, frame_seq};

/// A part of a checkpoint stays well under etcd's 1.5 MiB request limit.
const PART_BYTES: usize = 1024 * 1024;

const POINTER_MAGIC: &[u8; 4] = b"SCP1";
const POINTER_LEN: usize = 4 + 8 + 32 + 8 + 4 + 8 + 32;

/// What `<prefix>/checkpoint` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pointer {
    /// The sequence the state is as of, and the hash of that record.
    pub anchor: Anchor,
    /// The first sequence of the chunk that held `anchor.seq + 1` when it was written: the
    /// next checkpoint deletes the chunks before it.
    pub boundary: u64,
    parts: u32,
    len: u64,
    sha256: [u8; 32],
}

impl Pointer {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(POINTER_LEN);
        out.extend_from_slice(POINTER_MAGIC);
        out.extend_from_slice(&self.anchor.seq.to_be_bytes());
        out.extend_from_slice(&self.anchor.hash);
        out.extend_from_slice(&self.boundary.to_be_bytes());
        out.extend_from_slice(&self.parts.to_be_bytes());
        out.extend_from_slice(&self.len.to_be_bytes());
        out.extend_from_slice(&self.sha256);
        out
    }

    fn decode(v: &[u8]) -> Result<Pointer, String> {
        if v.len() != POINTER_LEN || &v[..4] != POINTER_MAGIC {
            return Err(format!(
                "not a checkpoint pointer ({} bytes, expected {POINTER_LEN} starting SCP1)",
                v.len()
            ));
        }
        let u64_at = |i: usize| u64::from_be_bytes(v[i..i + 8].try_into().expect("8 bytes"));
        Ok(Pointer {
            anchor: Anchor {
                seq: u64_at(4),
                hash: v[12..44].try_into().expect("32 bytes"),
            },
            boundary: u64_at(44),
            parts: u32::from_be_bytes(v[52..56].try_into().expect("4 bytes")),
            len: u64_at(56),
            sha256: v[64..96].try_into().expect("32 bytes"),
        })
    }
}

/// A checkpoint read back from etcd.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    pub anchor: Anchor,
    /// The encoded state as of `anchor.seq`.
    pub state: Vec<u8>,
}

impl Node {
    fn part_key(&self, seq: u64, part: u32) -> Vec<u8> {
        let mut k = self.keys.parts.clone();
        k.extend_from_slice(format!("{seq:020}/{part:06}").as_bytes());
        k
    }

    /// What `<prefix>/checkpoint` points at, if the leader has written a checkpoint.
    pub async fn checkpoint_pointer(&self) -> Result<Option<Pointer>, ReplicationError> {
        let Some(kv) = self.etcd.get(&self.keys.checkpoint).await? else {
            return Ok(None);
        };
        Pointer::decode(&kv.value)
            .map(Some)
            .map_err(|reason| self.malformed(&kv.key, reason))
    }

    /// The checkpoint etcd holds, with its state, checked against its recorded size and
    /// SHA-256. A checkpoint replaced while it is read is read again.
    pub async fn fetch_checkpoint(&self) -> Result<Option<Checkpoint>, ReplicationError> {
        for _ in 0..3 {
            let Some(p) = self.checkpoint_pointer().await? else {
                return Ok(None);
            };
            let mut state = Vec::with_capacity(p.len as usize);
            let mut complete = true;
            for part in 0..p.parts {
                match self.etcd.get(&self.part_key(p.anchor.seq, part)).await? {
                    Some(kv) => state.extend_from_slice(&kv.value),
                    None => {
                        complete = false;
                        break;
                    }
                }
            }
            if !complete {
                continue;
            }
            if state.len() as u64 != p.len || Sha256::digest(&state).as_slice() != p.sha256 {
                return Err(self.malformed(
                    &self.keys.checkpoint,
                    format!(
                        "the checkpoint at sequence {} does not match its recorded size and \
                         SHA-256",
                        p.anchor.seq
                    ),
                ));
            }
            return Ok(Some(Checkpoint {
                anchor: p.anchor,
                state,
            }));
        }
        Err(ReplicationError::Etcd(super::etcd::EtcdError::Unreachable(
            "the checkpoint kept changing while it was read".into(),
        )))
    }

    /// The first sequence of the chunk that holds `seq + 1` (or `seq + 1` when etcd holds
    /// nothing after `seq`): every chunk before it ends at or before `seq`.
    async fn boundary_after(&self, seq: u64) -> Result<u64, ReplicationError> {
        let Some((key, value)) = self.chunk_at_or_before(seq + 1).await? else {
            return Ok(seq + 1);
        };
        let frames = self.frames_of(&key, &value)?;
        let first = frames[0].0;
        let last = frames[frames.len() - 1].0;
        Ok(if last > seq { first } else { seq + 1 })
    }

    /// As the leader: stores `state` (the encoded projection as of record `anchor.seq`) as
    /// etcd's checkpoint, deletes what the previous one covered and compacts etcd's history.
    /// Returns `false` when etcd already holds a checkpoint at or after `anchor.seq`. Every
    /// write is fenced by the leadership; a fenced-out leader loses it, as for record writes.
    pub async fn publish_checkpoint(
        &self,
        anchor: Anchor,
        state: &[u8],
    ) -> Result<bool, ReplicationError> {
        let Some(fence) = self.fence() else {
            return Err(ReplicationError::Log(
                "this instance is not the leader".into(),
            ));
        };
        let previous = self.checkpoint_pointer().await?;
        if previous.is_some_and(|p| p.anchor.seq >= anchor.seq) {
            return Ok(false);
        }
        if self.etcd_head().await? < anchor.seq {
            return Err(ReplicationError::Log(format!(
                "etcd does not hold record {} yet; no checkpoint there",
                anchor.seq
            )));
        }
        let boundary = self.boundary_after(anchor.seq).await?;
        let leader = Compare::CreateRevision(self.keys.leader.clone(), fence);
        let parts: Vec<&[u8]> = if state.is_empty() {
            Vec::new()
        } else {
            state.chunks(PART_BYTES).collect()
        };
        for (i, part) in parts.iter().enumerate() {
            let key = self.part_key(anchor.seq, i as u32);
            let put = Op::Put {
                key: key.clone(),
                value: part.to_vec(),
                lease: None,
            };
            self.commit_fenced(std::slice::from_ref(&leader), &[put], &key)
                .await
                .map_err(ReplicationError::Log)?;
        }
        let pointer = Pointer {
            anchor,
            boundary,
            parts: parts.len() as u32,
            len: state.len() as u64,
            sha256: Sha256::digest(state).into(),
        };
        let mut ops = vec![
            Op::Put {
                key: self.keys.checkpoint.clone(),
                value: pointer.encode(),
                lease: None,
            },
            // The parts of every older checkpoint.
            Op::Delete {
                key: self.keys.parts.clone(),
                range_end: self.part_key(anchor.seq, 0),
            },
        ];
        if let Some(p) = previous {
            ops.push(Op::Delete {
                key: self.keys.log.clone(),
                range_end: self.keys.chunk(p.boundary),
            });
        }
        let revision = self
            .commit_fenced(&[leader], &ops, &self.keys.checkpoint)
            .await
            .map_err(ReplicationError::Log)?;
        if let Err(e) = self.etcd.compact(revision).await {
            // A compaction at or after this revision (another leader's, or a retry) is fine;
            // anything else only delays reclaiming space until the next checkpoint.
            tracing::warn!(revision, error = %e, "etcd compaction failed");
        }
        tracing::info!(
            seq = anchor.seq,
            bytes = state.len(),
            kept_from = previous.map_or(1, |p| p.boundary),
            revision,
            "checkpoint stored in etcd; older records deleted and etcd compacted"
        );
        Ok(true)
    }

    /// The highest sequence etcd's chunks hold, or its checkpoint's when no chunk follows it
    /// (0 when it holds neither).
    pub async fn etcd_head(&self) -> Result<u64, ReplicationError> {
        let end = prefix_end(&self.keys.log);
        let r = self.etcd.range(&self.keys.log, &end, 1, true).await?;
        let chunks = match r.kvs.into_iter().next() {
            None => 0,
            Some(kv) => {
                let frames =
                    super::unpack(&kv.value).map_err(|reason| self.malformed(&kv.key, reason))?;
                frames
                    .last()
                    .and_then(|f| frame_seq(f))
                    .ok_or_else(|| self.malformed(&kv.key, "a frame without a sequence".into()))?
            }
        };
        let checkpoint = self.checkpoint_pointer().await?.map_or(0, |p| p.anchor.seq);
        Ok(chunks.max(checkpoint))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_round_trip_and_are_checked() {
        let p = Pointer {
            anchor: Anchor {
                seq: 1234,
                hash: [9; 32],
            },
            boundary: 1200,
            parts: 3,
            len: 2_500_000,
            sha256: [4; 32],
        };
        assert_eq!(Pointer::decode(&p.encode()), Ok(p));
        assert!(
            Pointer::decode(b"SCP1")
                .unwrap_err()
                .contains("not a checkpoint")
        );
        let mut other = p.encode();
        other[0] = b'X';
        assert!(Pointer::decode(&other).is_err());
    }
}
