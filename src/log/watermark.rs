//! The watermark: how far the log went, kept apart from sled.
//!
//! sled drops what it cannot read back (a torn or damaged stretch of its file and everything
//! after it) without a word, and the chain of what remains checks out. So the writer also
//! records the sequence and hash of the last record of each committed batch in a small file
//! beside sled's (`watermark` in the log's dir), written and fsynced after sled's flush and
//! before the batch is acknowledged. At open, a log whose store ends before the watermark has
//! lost acknowledged records, and one whose record at the watermark's sequence has another
//! hash is not the log that was acknowledged.
//!
//! The file holds two fixed slots of [`SLOT`] bytes, written in turn, each with its own
//! checksum: a write torn by a crash leaves the other slot, one commit older, readable. The
//! file never grows after it is made, so a full disk cannot fail its writes.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

/// The file's name in the log's dir.
pub(crate) const FILE: &str = "watermark";
const SLOT: usize = 64;
const MAGIC: &[u8; 4] = b"SWM1";
/// Bytes of a slot the checksum covers (magic, sequence, hash).
const BODY: usize = 4 + 8 + 32;

/// The last acknowledged record: its sequence and hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    pub seq: u64,
    pub hash: [u8; 32],
}

/// What was found in the file at open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// No file: a new log, or one written before storch kept a watermark.
    Absent,
    Mark(Mark),
    /// The file exists but neither slot checks out.
    Unreadable(String),
}

/// The open watermark file; the writer is its only writer.
pub(crate) struct Watermark {
    file: File,
    path: PathBuf,
    /// The slot the next write goes to.
    next_slot: Mutex<u64>,
}

fn encode(mark: Mark) -> [u8; SLOT] {
    let mut out = [0u8; SLOT];
    out[..4].copy_from_slice(MAGIC);
    out[4..12].copy_from_slice(&mark.seq.to_be_bytes());
    out[12..44].copy_from_slice(&mark.hash);
    let sum = Sha256::digest(&out[..BODY]);
    out[BODY..SLOT].copy_from_slice(&sum[..SLOT - BODY]);
    out
}

fn decode(slot: &[u8]) -> Option<Mark> {
    if slot.len() != SLOT || &slot[..4] != MAGIC {
        return None;
    }
    let sum = Sha256::digest(&slot[..BODY]);
    if sum[..SLOT - BODY] != slot[BODY..SLOT] {
        return None;
    }
    Some(Mark {
        seq: u64::from_be_bytes(slot[4..12].try_into().ok()?),
        hash: slot[12..44].try_into().ok()?,
    })
}

/// Reads the watermark of the log in `dir` without opening it for writing (`events verify`
/// reads it through the open log; this is for the open itself).
fn read(path: &Path) -> std::io::Result<Found> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Absent),
        Err(e) => return Err(e),
    };
    let best = bytes
        .chunks(SLOT)
        .take(2)
        .filter_map(decode)
        .max_by_key(|m| m.seq);
    Ok(match best {
        Some(mark) => Found::Mark(mark),
        None => Found::Unreadable(format!(
            "{} ({} bytes) holds no readable watermark",
            path.display(),
            bytes.len()
        )),
    })
}

impl Watermark {
    /// Opens (creating if missing, mode `0600`) the watermark file in `dir` and reads it.
    pub fn open(dir: &Path) -> std::io::Result<(Watermark, Found)> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = dir.join(FILE);
        let found = read(&path)?;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)?;
        // The slot after the newest readable one, so that one survives the next write.
        let next_slot = match &found {
            Found::Mark(m) => {
                let bytes = std::fs::read(&path)?;
                let newest = bytes
                    .chunks(SLOT)
                    .take(2)
                    .position(|s| decode(s) == Some(*m))
                    .unwrap_or(1) as u64;
                newest + 1
            }
            _ => 0,
        };
        Ok((
            Watermark {
                file,
                path,
                next_slot: Mutex::new(next_slot),
            },
            found,
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records `mark` durably: one slot written in place, then `fdatasync`. Blocking.
    pub fn write(&self, mark: Mark) -> std::io::Result<()> {
        let mut next = self.next_slot.lock().unwrap_or_else(|e| e.into_inner());
        let slot = *next % 2;
        self.file.write_all_at(&encode(mark), slot * SLOT as u64)?;
        self.file.sync_data()?;
        *next = slot + 1;
        Ok(())
    }

    /// Records `mark` in both slots (a new file, or the operator accepting a shorter log).
    pub fn reset(&self, mark: Mark) -> std::io::Result<()> {
        let mut both = [0u8; 2 * SLOT];
        both[..SLOT].copy_from_slice(&encode(mark));
        both[SLOT..].copy_from_slice(&encode(mark));
        self.file.write_all_at(&both, 0)?;
        self.file.set_len(2 * SLOT as u64)?;
        self.file.sync_all()?;
        *self.next_slot.lock().unwrap_or_else(|e| e.into_inner()) = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(seq: u64) -> Mark {
        Mark {
            seq,
            hash: [seq as u8; 32],
        }
    }

    #[test]
    fn the_newest_readable_slot_wins_and_a_torn_slot_leaves_the_other() {
        let dir = tempfile::tempdir().unwrap();
        let (w, found) = Watermark::open(dir.path()).unwrap();
        assert_eq!(found, Found::Absent);
        w.reset(mark(1)).unwrap();
        w.write(mark(2)).unwrap();
        w.write(mark(3)).unwrap();
        drop(w);
        let (w, found) = Watermark::open(dir.path()).unwrap();
        assert_eq!(found, Found::Mark(mark(3)));
        // The next write goes to the older slot, so a tear in it leaves 3 readable.
        w.write(mark(4)).unwrap();
        drop(w);
        let path = dir.path().join(FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let slot4 = bytes.chunks(SLOT).position(|s| decode(s) == Some(mark(4)));
        let slot4 = slot4.expect("4 was written");
        bytes[slot4 * SLOT + 20] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let (_, found) = Watermark::open(dir.path()).unwrap();
        assert_eq!(found, Found::Mark(mark(3)));
        let other = 1 - slot4;
        bytes[other * SLOT + 5] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let (_, found) = Watermark::open(dir.path()).unwrap();
        assert!(
            matches!(&found, Found::Unreadable(why) if why.contains("no readable watermark")),
            "{found:?}"
        );
    }
}
