//! The compact in-memory encoding of a volume's config: a presence mask, then only the
//! fields that are not empty (most of Trident's 36 fields are). Only this build reads what it
//! wrote (checkpoints of another state format are refused), so it carries no version.
//!
//! Layout: the mask as LEB128 (bit 0 protocol, 1 iSCSI portals, 2 LUN number, 3 VAGs, then
//! one bit per string in the order of [`strings!`], the usually set ones first so a typical
//! mask takes two bytes), then each present field in bit order: protocol one byte, a string
//! or a list as its LEB128 length and items, an integer as zigzag LEB128.

use crate::model::{AccessInfo, Protocol, VolumeConfig};

/// Every string field of a config, in mask order. Binds every field by name (no `..`), so a
/// field added to `VolumeConfig` or `AccessInfo` fails to compile here until it is encoded.
/// Works on `&VolumeConfig` and `&mut VolumeConfig` alike.
macro_rules! strings {
    ($c:expr) => {{
        let VolumeConfig {
            version,
            name,
            internal_name,
            size,
            protocol: _,
            space_reserve,
            security_style,
            snapshot_policy,
            export_policy,
            snapshot_directory,
            unix_permissions,
            storage_class,
            access_mode,
            access_information,
            block_size,
            file_system,
            encryption,
            clone_source_volume,
            clone_source_volume_internal,
            clone_source_snapshot,
            split_on_clone,
            qos,
            qos_type,
        } = $c;
        let AccessInfo {
            iscsi_target_portal,
            iscsi_portals: _,
            iscsi_target_iqn,
            iscsi_lun_number: _,
            iscsi_interface,
            iscsi_igroup,
            iscsi_vags: _,
            iscsi_username,
            iscsi_initiator_secret,
            iscsi_target_secret,
            nfs_server_ip,
            nfs_path,
            local_path,
        } = access_information;
        [
            version,
            name,
            internal_name,
            size,
            storage_class,
            access_mode,
            nfs_server_ip,
            nfs_path,
            space_reserve,
            security_style,
            snapshot_policy,
            export_policy,
            snapshot_directory,
            unix_permissions,
            block_size,
            file_system,
            encryption,
            clone_source_volume,
            clone_source_volume_internal,
            clone_source_snapshot,
            split_on_clone,
            qos,
            qos_type,
            local_path,
            iscsi_target_portal,
            iscsi_target_iqn,
            iscsi_interface,
            iscsi_igroup,
            iscsi_username,
            iscsi_initiator_secret,
            iscsi_target_secret,
        ]
    }};
}

const PROTOCOL: u64 = 1;
const PORTALS: u64 = 1 << 1;
const LUN: u64 = 1 << 2;
const VAGS: u64 = 1 << 3;
const FIRST_STRING: u32 = 4;

fn put_uint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn put_int(out: &mut Vec<u8>, n: i64) {
    put_uint(out, ((n << 1) ^ (n >> 63)) as u64);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_uint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

pub(super) fn encode(c: &VolumeConfig) -> Box<[u8]> {
    let access = &c.access_information;
    let strings = strings!(c);
    let mut mask = 0;
    if c.protocol != Protocol::Any {
        mask |= PROTOCOL;
    }
    if !access.iscsi_portals.is_empty() {
        mask |= PORTALS;
    }
    if access.iscsi_lun_number != 0 {
        mask |= LUN;
    }
    if !access.iscsi_vags.is_empty() {
        mask |= VAGS;
    }
    for (i, s) in strings.iter().enumerate() {
        if !s.is_empty() {
            mask |= 1 << (FIRST_STRING + i as u32);
        }
    }
    let mut out = Vec::with_capacity(
        8 + strings.iter().map(|s| s.len() + 1).sum::<usize>()
            + access
                .iscsi_portals
                .iter()
                .map(|s| s.len() + 1)
                .sum::<usize>()
            + 10 * access.iscsi_vags.len(),
    );
    put_uint(&mut out, mask);
    if mask & PROTOCOL != 0 {
        out.push(match c.protocol {
            Protocol::File => 0,
            Protocol::Block => 1,
            Protocol::Any => unreachable!("not encoded"),
        });
    }
    if mask & PORTALS != 0 {
        put_uint(&mut out, access.iscsi_portals.len() as u64);
        for p in &access.iscsi_portals {
            put_str(&mut out, p);
        }
    }
    if mask & LUN != 0 {
        put_int(&mut out, access.iscsi_lun_number.into());
    }
    if mask & VAGS != 0 {
        put_uint(&mut out, access.iscsi_vags.len() as u64);
        for v in &access.iscsi_vags {
            put_int(&mut out, *v);
        }
    }
    for s in strings {
        if !s.is_empty() {
            put_str(&mut out, s);
        }
    }
    out.into_boxed_slice()
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*b)
    }

    fn uint(&mut self) -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            n |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }

    fn int(&mut self) -> Option<i64> {
        let n = self.uint()?;
        Some((n >> 1) as i64 ^ -((n & 1) as i64))
    }

    fn string(&mut self) -> Option<String> {
        let len = usize::try_from(self.uint()?).ok()?;
        if len > self.0.len() {
            return None;
        }
        let (s, rest) = self.0.split_at(len);
        self.0 = rest;
        String::from_utf8(s.to_vec()).ok()
    }

    fn len(&mut self) -> Option<usize> {
        // Every item takes at least one byte.
        usize::try_from(self.uint()?)
            .ok()
            .filter(|n| *n <= self.0.len())
    }
}

/// Decodes what [`encode`] wrote; `None` for anything else.
pub(super) fn decode(bytes: &[u8]) -> Option<VolumeConfig> {
    let mut r = Reader(bytes);
    let mask = r.uint()?;
    let mut c = VolumeConfig::default();
    if mask & PROTOCOL != 0 {
        c.protocol = match r.byte()? {
            0 => Protocol::File,
            1 => Protocol::Block,
            _ => return None,
        };
    }
    let access = &mut c.access_information;
    if mask & PORTALS != 0 {
        let n = r.len()?;
        access.iscsi_portals = (0..n).map(|_| r.string()).collect::<Option<_>>()?;
    }
    if mask & LUN != 0 {
        access.iscsi_lun_number = i32::try_from(r.int()?).ok()?;
    }
    if mask & VAGS != 0 {
        let n = r.len()?;
        access.iscsi_vags = (0..n).map(|_| r.int()).collect::<Option<_>>()?;
    }
    let strings = strings!(&mut c);
    if mask >> (FIRST_STRING + strings.len() as u32) != 0 {
        return None;
    }
    for (i, s) in strings.into_iter().enumerate() {
        if mask & (1 << (FIRST_STRING + i as u32)) != 0 {
            *s = r.string()?;
        }
    }
    r.0.is_empty().then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field set to a different value.
    fn full() -> VolumeConfig {
        let mut c = VolumeConfig {
            protocol: Protocol::Block,
            ..Default::default()
        };
        c.access_information.iscsi_portals = vec!["10.0.0.1:3260".into(), String::new()];
        c.access_information.iscsi_lun_number = -7;
        c.access_information.iscsi_vags = vec![1, -2, i64::MAX, i64::MIN];
        for (i, s) in strings!(&mut c).into_iter().enumerate() {
            *s = format!("field {i} ✓");
        }
        c
    }

    #[test]
    fn every_field_round_trips_and_empty_ones_take_no_room() {
        let full = full();
        assert_eq!(decode(&encode(&full)), Some(full.clone()));
        for (i, s) in strings!(&full).into_iter().enumerate() {
            assert_eq!(*s, format!("field {i} ✓"), "string {i} is a distinct field");
        }
        assert_eq!(&*encode(&VolumeConfig::default()), [0]);
        assert_eq!(decode(&[0]), Some(VolumeConfig::default()));
        let typical = VolumeConfig {
            version: "1".into(),
            name: "pvc-00000001".into(),
            internal_name: "trident-pvc-00000001".into(),
            size: "1073741824".into(),
            protocol: Protocol::File,
            storage_class: "bench".into(),
            access_information: AccessInfo {
                nfs_server_ip: "192.0.2.1".into(),
                nfs_path: "/trident-pvc-00000001".into(),
                ..Default::default()
            },
            ..Default::default()
        };
        let bytes = encode(&typical);
        assert_eq!(decode(&bytes), Some(typical.clone()));
        let bincode = bincode::encode_to_vec(&typical, bincode::config::standard()).unwrap();
        assert_eq!((bytes.len(), bincode.len()), (88, 113));
        // Another lun number, protocol Any, an empty list: still exact.
        let mut c = typical;
        c.protocol = Protocol::Any;
        c.access_information.iscsi_lun_number = i32::MIN;
        assert_eq!(decode(&encode(&c)), Some(c));
    }

    #[test]
    fn anything_else_is_refused() {
        let bytes = encode(&full());
        for n in 0..bytes.len() {
            assert_eq!(decode(&bytes[..n]), None, "truncated to {n}");
        }
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert_eq!(decode(&longer), None);
        assert_eq!(decode(&[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F]), None);
        assert_eq!(decode(&[1, 2]), None, "no such protocol");
    }
}
