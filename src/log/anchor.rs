//! The anchor of a log that starts from a checkpoint instead of sequence 1.
//!
//! A standby that joins after etcd's history was compacted (or was reset onto a newer
//! checkpoint) holds no records up to the checkpoint's sequence `B`. Its events tree then
//! holds, under key `B`, an anchor instead of a record: `B` and the hash of record `B` as the
//! leader recorded it. The chain is checked from there on exactly as from the genesis hash:
//! record `B + 1` must link to the anchor's hash. The records up to `B` (the audit of the
//! whole chain) stay in the logs of the instances that committed or copied them.

/// First byte of an anchor (a record starts with `codec::FRAME_MAGIC`).
const ANCHOR_MAGIC: u8 = 0xA7;
const ANCHOR_FORMAT: u8 = 1;
const ANCHOR_LEN: usize = 2 + 8 + 32;

/// Where a log starts when it does not start at sequence 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anchor {
    /// The sequence of the checkpoint the log starts from (its first record is `seq + 1`).
    pub seq: u64,
    /// The recorded hash of record `seq`, which record `seq + 1` links to.
    pub hash: [u8; 32],
}

pub(crate) fn encode(anchor: &Anchor) -> Vec<u8> {
    let mut out = Vec::with_capacity(ANCHOR_LEN);
    out.push(ANCHOR_MAGIC);
    out.push(ANCHOR_FORMAT);
    out.extend_from_slice(&anchor.seq.to_be_bytes());
    out.extend_from_slice(&anchor.hash);
    out
}

/// The anchor stored under `key_seq`, if `value` is one (and claims that sequence).
pub(crate) fn parse(key_seq: u64, value: &[u8]) -> Option<Anchor> {
    if value.len() != ANCHOR_LEN || value[0] != ANCHOR_MAGIC || value[1] != ANCHOR_FORMAT {
        return None;
    }
    let seq = u64::from_be_bytes(value[2..10].try_into().ok()?);
    (seq == key_seq).then(|| Anchor {
        seq,
        hash: value[10..].try_into().expect("32 bytes"),
    })
}

/// The anchor of the log in `events`: only ever its first entry.
pub(crate) fn of(events: &sled::Tree) -> Option<Anchor> {
    let (k, v) = events.first().ok().flatten()?;
    let seq = u64::from_be_bytes(<[u8; 8]>::try_from(&*k).ok()?);
    parse(seq, &v)
}

#[cfg(test)]
mod tests {
    use super::super::{DiscardSink, Durability, EventLog, LogError, NewEvent};
    use super::*;

    fn ev(n: u64) -> NewEvent {
        NewEvent {
            kind: "Test".into(),
            stream: format!("test/{n}"),
            schema: 1,
            payload: n.to_be_bytes().to_vec(),
        }
    }

    /// A log of `n` records, appended one batch each.
    async fn leader_log(dir: &std::path::Path, n: u64) -> EventLog {
        let log = EventLog::open(dir, Durability::Flush).unwrap();
        let appender = log.start_writer(std::sync::Arc::new(DiscardSink));
        for i in 1..=n {
            appender.append("t", vec![ev(i)]).await.unwrap();
        }
        drop(appender);
        log.shutdown().await.unwrap();
        log
    }

    #[tokio::test]
    async fn a_log_started_from_a_checkpoint_checks_its_chain_from_the_recorded_hash() {
        let tmp = tempfile::tempdir().unwrap();
        let leader = leader_log(&tmp.path().join("a"), 10).await;
        let frames = leader.frames_from(1, 100).unwrap();
        let anchor = Anchor {
            seq: 6,
            hash: leader.hash_at(6).unwrap(),
        };

        let dir = tmp.path().join("b");
        let log = EventLog::open(&dir, Durability::Flush).unwrap();
        // Whatever the log held before is replaced.
        log.append_replicated(&[&frames[0]]).await.unwrap();
        log.start_from_checkpoint(anchor, b"state at 6".to_vec())
            .await
            .unwrap();
        assert_eq!(log.head(), (6, anchor.hash));
        assert_eq!(log.anchor(), Some(anchor));
        assert_eq!(log.raw_frame(1), None);
        assert_eq!(
            log.latest_checkpoint().unwrap(),
            Some((6, b"state at 6".to_vec()))
        );
        assert_eq!(log.hash_at(6), Some(anchor.hash));
        assert_eq!(log.read_from(1).count(), 0);

        // The tail links to the recorded hash; a record that does not is refused.
        let err = log.append_replicated(&[&frames[7]]).await.unwrap_err();
        assert!(matches!(err, LogError::Corrupt { seq: 7, .. }), "{err:?}");
        let tail: Vec<&[u8]> = frames[6..].iter().map(Vec::as_slice).collect();
        log.append_replicated(&tail).await.unwrap();
        assert_eq!(log.head(), leader.head());
        let seqs: Vec<u64> = log.read_from(1).map(|e| e.unwrap().seq).collect();
        assert_eq!(seqs, vec![7, 8, 9, 10]);
        let report = log.verify();
        assert_eq!((report.events, report.head_seq), (4, 10));
        assert_eq!((report.first_bad, report.anchor), (None, Some(anchor)));
        assert_eq!(log.frames_from(7, 100).unwrap(), frames[6..].to_vec());

        // Never cut back below where it starts; down to it is fine.
        let err = log.truncate_after(5).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("starts from the checkpoint at sequence 6"),
            "{err}"
        );
        assert_eq!(log.cut_back_after(8, "test").await.unwrap(), 2);
        drop(log);

        // Reopened, it still starts there; a broken link after it is found.
        let log = EventLog::open(&dir, Durability::Flush).unwrap();
        assert_eq!(log.head().0, 8);
        assert_eq!(log.verify().anchor, Some(anchor));
        log.corrupt_for_tests(7, |raw| {
            let n = raw.len();
            raw[n - 40] ^= 1;
        });
        assert_eq!(log.verify().first_bad.map(|(seq, _)| seq), Some(7));
        assert_eq!(leader.verify().anchor, None);
    }

    #[test]
    fn anchors_round_trip_and_are_not_records() {
        let a = Anchor {
            seq: 42,
            hash: [7; 32],
        };
        let bytes = encode(&a);
        assert_eq!(parse(42, &bytes), Some(a));
        assert_eq!(parse(41, &bytes), None, "stored under another sequence");
        assert!(super::super::codec::parse(&bytes).is_err());
        assert_eq!(parse(42, &bytes[..bytes.len() - 1]), None);
    }
}
