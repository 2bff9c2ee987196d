//! The on-disk envelope frame and the chain hash.
//!
//! Frame, format 1 (all integers big-endian, `varint` = unsigned LEB128, minimal form):
//!
//! ```text
//! magic      u8        0xE7
//! format     u8        1
//! seq        u64
//! time_ms    u64
//! id         [u8; 16]  uuid
//! schema     u16
//! prev_hash  [u8; 32]  hash of the envelope before this one (GENESIS_HASH for seq 1)
//! request_id varint length + UTF-8
//! kind       varint length + UTF-8
//! stream     varint length + UTF-8
//! payload    varint length + bytes
//! hash       [u8; 32]
//! ```
//!
//! The frame is self-delimiting and must be consumed exactly: any truncation, trailing byte or
//! unknown magic/format is a decoding error. The previous hash is stored so that a record can
//! be checked on its own (its hash recomputes) and against its neighbour (it links), and the
//! two failures are told apart.
//!
//! The hash does not depend on the frame layout: it is SHA-256 over a domain tag, the previous
//! hash and each field of the envelope in a fixed, length-prefixed order (see
//! [`Envelope::compute_hash`]), so a future frame format can keep existing hashes.

use sha2::{Digest, Sha256};

use super::Envelope;

pub(crate) const FRAME_MAGIC: u8 = 0xE7;
pub(crate) const FRAME_FORMAT: u8 = 1;

/// Bytes before the first variable-length field.
const FIXED_HEAD: usize = 1 + 1 + 8 + 8 + 16 + 2 + 32;
const HASH_LEN: usize = 32;
/// Separates this hash from any other SHA-256 use.
const HASH_DOMAIN: &[u8] = b"storch/log/envelope/v1\0";

impl Envelope {
    /// The chain hash of this envelope given the previous envelope's hash (the stored `hash`
    /// field is not an input).
    pub fn compute_hash(&self, prev_hash: &[u8; 32]) -> [u8; 32] {
        chain_hash(
            prev_hash,
            self.seq,
            self.time_ms,
            self.id.as_bytes(),
            self.schema,
            [
                self.request_id.as_bytes(),
                self.kind.as_bytes(),
                self.stream.as_bytes(),
                &self.payload,
            ],
        )
    }
}

/// SHA-256 over the domain tag, the previous hash and the fields in a fixed, length-prefixed
/// order; the one definition of the chain hash (for owned envelopes and parsed frames alike).
fn chain_hash(
    prev_hash: &[u8; 32],
    seq: u64,
    time_ms: u64,
    id: &[u8; 16],
    schema: u16,
    fields: [&[u8]; 4],
) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(HASH_DOMAIN);
    h.update(prev_hash);
    h.update(seq.to_be_bytes());
    h.update(time_ms.to_be_bytes());
    h.update(id);
    h.update(schema.to_be_bytes());
    for field in fields {
        h.update((field.len() as u64).to_be_bytes());
        h.update(field);
    }
    h.finalize().into()
}

fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_field(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Exact size of the encoded frame.
pub(crate) fn encoded_len(env: &Envelope) -> usize {
    let var = |n: usize| varint_len(n as u64) + n;
    FIXED_HEAD
        + var(env.request_id.len())
        + var(env.kind.len())
        + var(env.stream.len())
        + var(env.payload.len())
        + HASH_LEN
}

/// Encodes `env` (whose `hash` must already be set) with the previous hash it was chained to.
/// Allocates exactly once.
pub(crate) fn encode(env: &Envelope, prev_hash: &[u8; 32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_len(env));
    out.push(FRAME_MAGIC);
    out.push(FRAME_FORMAT);
    out.extend_from_slice(&env.seq.to_be_bytes());
    out.extend_from_slice(&env.time_ms.to_be_bytes());
    out.extend_from_slice(env.id.as_bytes());
    out.extend_from_slice(&env.schema.to_be_bytes());
    out.extend_from_slice(prev_hash);
    put_field(&mut out, env.request_id.as_bytes());
    put_field(&mut out, env.kind.as_bytes());
    put_field(&mut out, env.stream.as_bytes());
    put_field(&mut out, &env.payload);
    out.extend_from_slice(&env.hash);
    debug_assert_eq!(out.len(), encoded_len(env));
    out
}

/// A decoded frame: the envelope and the previous hash stored with it.
#[cfg(test)]
#[derive(Debug)]
pub(crate) struct Decoded {
    pub env: Envelope,
    pub prev_hash: [u8; 32],
}

/// A frame parsed in place: the variable-length fields borrow the stored bytes, so checking
/// a record allocates nothing.
#[derive(Debug)]
pub(crate) struct Frame<'a> {
    pub seq: u64,
    pub time_ms: u64,
    pub id: [u8; 16],
    pub schema: u16,
    pub prev_hash: [u8; 32],
    pub request_id: &'a str,
    pub kind: &'a str,
    pub stream: &'a str,
    pub payload: &'a [u8],
    /// Where `payload` starts in the frame.
    pub payload_at: usize,
    pub hash: [u8; 32],
}

impl Frame<'_> {
    /// The chain hash of the frame's fields given its stored previous hash.
    pub fn compute_hash(&self) -> [u8; 32] {
        chain_hash(
            &self.prev_hash,
            self.seq,
            self.time_ms,
            &self.id,
            self.schema,
            [
                self.request_id.as_bytes(),
                self.kind.as_bytes(),
                self.stream.as_bytes(),
                self.payload,
            ],
        )
    }

    pub fn to_envelope(&self) -> Envelope {
        Envelope {
            seq: self.seq,
            time_ms: self.time_ms,
            id: uuid::Uuid::from_bytes(self.id),
            request_id: self.request_id.to_string(),
            schema: self.schema,
            kind: self.kind.to_string(),
            stream: self.stream.to_string(),
            payload: self.payload.to_vec(),
            hash: self.hash,
        }
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        let left = self.buf.len() - self.pos;
        if left < n {
            return Err(format!(
                "record truncated: {what} needs {n} bytes at offset {}, {left} left",
                self.pos
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn varint(&mut self, what: &str) -> Result<u64, String> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = self.take(1, what)?[0];
            let bits = u64::from(b & 0x7f);
            if i == 9 && b > 1 {
                return Err(format!("length of {what} overflows"));
            }
            v |= bits << (7 * i);
            if b & 0x80 == 0 {
                if b == 0 && i > 0 {
                    return Err(format!("length of {what} is not in minimal form"));
                }
                return Ok(v);
            }
        }
        Err(format!("length of {what} overflows"))
    }

    fn field(&mut self, what: &str) -> Result<&'a [u8], String> {
        let len = self.varint(what)?;
        let len = usize::try_from(len).map_err(|_| format!("length of {what} overflows"))?;
        self.take(len, what)
    }

    fn string(&mut self, what: &str) -> Result<&'a str, String> {
        let bytes = self.field(what)?;
        std::str::from_utf8(bytes).map_err(|_| format!("{what} is not valid UTF-8"))
    }
}

/// Parses one frame in place. The error is a human-readable reason (it ends up in
/// `LogError::Corrupt`). Does not check the hash.
pub(crate) fn parse(bytes: &[u8]) -> Result<Frame<'_>, String> {
    let mut r = Reader { buf: bytes, pos: 0 };
    let magic = r.take(1, "magic byte")?[0];
    if magic != FRAME_MAGIC {
        return Err(format!(
            "not an envelope (magic byte {magic:#04x}, expected {FRAME_MAGIC:#04x})"
        ));
    }
    let format = r.take(1, "format byte")?[0];
    if format != FRAME_FORMAT {
        return Err(format!(
            "unknown envelope format {format} (this build reads format {FRAME_FORMAT})"
        ));
    }
    let seq = u64::from_be_bytes(r.array("sequence")?);
    let time_ms = u64::from_be_bytes(r.array("time")?);
    let id = r.array("event id")?;
    let schema = u16::from_be_bytes(r.array("schema")?);
    let prev_hash = r.array("previous hash")?;
    let request_id = r.string("request id")?;
    let kind = r.string("kind")?;
    let stream = r.string("stream")?;
    let payload = r.field("payload")?;
    let payload_at = r.pos - payload.len();
    let hash = r.array("hash")?;
    if r.pos != bytes.len() {
        return Err(format!(
            "{} unexpected bytes after the end of the record",
            bytes.len() - r.pos
        ));
    }
    Ok(Frame {
        seq,
        time_ms,
        id,
        schema,
        prev_hash,
        request_id,
        kind,
        stream,
        payload,
        payload_at,
        hash,
    })
}

/// Decodes one frame into an owned envelope (see [`parse`]). Does not check the hash.
#[cfg(test)]
pub(crate) fn decode(bytes: &[u8]) -> Result<Decoded, String> {
    let frame = parse(bytes)?;
    Ok(Decoded {
        env: frame.to_envelope(),
        prev_hash: frame.prev_hash,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample(payload: Vec<u8>) -> (Envelope, [u8; 32]) {
        let prev = [7u8; 32];
        let mut env = Envelope {
            seq: 42,
            time_ms: 1_700_000_000_000,
            id: uuid::Uuid::now_v7(),
            request_id: "req-1".into(),
            schema: 3,
            kind: "VolumeCreated".into(),
            stream: "volume/pvc-1".into(),
            payload,
            hash: [0; 32],
        };
        env.hash = env.compute_hash(&prev);
        (env, prev)
    }

    #[test]
    fn varints_round_trip_at_boundaries() {
        for v in [0u64, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out.len(), varint_len(v));
            let mut r = Reader { buf: &out, pos: 0 };
            assert_eq!(r.varint("x").unwrap(), v);
            assert_eq!(r.pos, out.len());
        }
        // Overlong forms are refused.
        let mut r = Reader {
            buf: &[0x80, 0x00],
            pos: 0,
        };
        assert!(r.varint("x").is_err());
    }

    #[test]
    fn every_field_changes_the_hash() {
        let (env, prev) = sample(b"payload".to_vec());
        let base = env.compute_hash(&prev);
        let mut variants = Vec::new();
        let mut e = env.clone();
        e.seq += 1;
        variants.push(e);
        let mut e = env.clone();
        e.time_ms += 1;
        variants.push(e);
        let mut e = env.clone();
        e.id = uuid::Uuid::now_v7();
        variants.push(e);
        let mut e = env.clone();
        e.request_id.push('x');
        variants.push(e);
        let mut e = env.clone();
        e.schema += 1;
        variants.push(e);
        let mut e = env.clone();
        e.kind.push('x');
        variants.push(e);
        let mut e = env.clone();
        e.stream.push('x');
        variants.push(e);
        let mut e = env.clone();
        e.payload.push(0);
        variants.push(e);
        // Moving a byte between adjacent fields must change the hash too.
        let mut e = env.clone();
        let c = e.kind.pop().unwrap();
        e.stream.insert(0, c);
        variants.push(e);
        for v in variants {
            assert_ne!(v.compute_hash(&prev), base, "{v:?}");
        }
        assert_ne!(env.compute_hash(&[8u8; 32]), base);
    }

    proptest! {
        #[test]
        fn frames_round_trip_and_every_truncation_is_detected(
            payload in proptest::collection::vec(any::<u8>(), 0..600),
            rid in ".{0,40}",
            kind in "[A-Za-z]{0,30}",
            stream in ".{0,200}",
            schema in any::<u16>(),
            seq in 1u64..u64::MAX,
        ) {
            let (mut env, prev) = sample(payload);
            env.request_id = rid;
            env.kind = kind;
            env.stream = stream;
            env.schema = schema;
            env.seq = seq;
            env.hash = env.compute_hash(&prev);
            let bytes = encode(&env, &prev);
            let d = decode(&bytes).unwrap();
            prop_assert_eq!(&d.env, &env);
            prop_assert_eq!(d.prev_hash, prev);
            let frame = parse(&bytes).unwrap();
            prop_assert_eq!(frame.compute_hash(), env.hash);
            prop_assert_eq!(&bytes[frame.payload_at..][..frame.payload.len()], &env.payload[..]);
            for cut in 0..bytes.len() {
                prop_assert!(decode(&bytes[..cut]).is_err(), "cut at {}", cut);
            }
            let mut longer = bytes.clone();
            longer.push(0);
            prop_assert!(decode(&longer).is_err());
        }
    }
}
