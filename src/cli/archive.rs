//! A `.tar.gz` writer for `storch logs --archive`: ustar entries of regular files, gzip with
//! stored (uncompressed) deflate blocks, so no compression library is needed and every `tar
//! -xzf` reads it.

/// The files of an archive, in order: (path inside, content).
#[derive(Debug, Default)]
pub struct Archive {
    entries: Vec<(String, Vec<u8>)>,
}

impl Archive {
    pub fn add(&mut self, path: &str, content: impl Into<Vec<u8>>) {
        self.entries.push((path.to_string(), content.into()));
    }

    /// The archive as tar.gz bytes; `mtime` (seconds since the epoch) for every entry.
    pub fn to_tar_gz(&self, mtime: u64) -> Vec<u8> {
        gzip(&self.tar(mtime), mtime)
    }

    fn tar(&self, mtime: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for (path, content) in &self.entries {
            let mut header = [0u8; 512];
            let name = path.as_bytes();
            // ustar: up to 100 bytes of name, up to 155 of prefix.
            let (prefix, name) = if name.len() <= 100 {
                (&[][..], name)
            } else {
                let split = path[..path.len().min(156)].rfind('/').unwrap_or(0);
                (&name[..split], &name[split + 1..])
            };
            header[..name.len().min(100)].copy_from_slice(&name[..name.len().min(100)]);
            let octal = |field: &mut [u8], value: u64| {
                let text = format!("{value:0width$o}\0", width = field.len() - 1);
                field.copy_from_slice(text.as_bytes());
            };
            octal(&mut header[100..108], 0o644);
            octal(&mut header[108..116], 0);
            octal(&mut header[116..124], 0);
            octal(&mut header[124..136], content.len() as u64);
            octal(&mut header[136..148], mtime);
            header[148..156].copy_from_slice(b"        ");
            header[156] = b'0';
            header[257..263].copy_from_slice(b"ustar\0");
            header[263..265].copy_from_slice(b"00");
            header[345..345 + prefix.len().min(155)]
                .copy_from_slice(&prefix[..prefix.len().min(155)]);
            let sum: u64 = header.iter().map(|b| *b as u64).sum();
            let text = format!("{sum:06o}\0 ");
            header[148..156].copy_from_slice(text.as_bytes());
            out.extend_from_slice(&header);
            out.extend_from_slice(content);
            out.resize(out.len().div_ceil(512) * 512, 0);
        }
        out.resize(out.len() + 1024, 0);
        out
    }
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for byte in data {
        crc ^= *byte as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn gzip(data: &[u8], mtime: u64) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0];
    out.extend_from_slice(&(mtime as u32).to_le_bytes());
    out.extend_from_slice(&[0, 255]);
    let mut chunks = data.chunks(65_535).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        out.push(u8::from(chunks.peek().is_none()));
        let len = chunk.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_of_a_known_string() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    }

    #[test]
    fn tar_headers_carry_their_checksum_and_size() {
        let mut a = Archive::default();
        a.add("logs/storch-0/storch.log", "hello\n");
        let tar = a.tar(0);
        assert_eq!(tar.len(), 512 + 512 + 1024);
        assert_eq!(&tar[..24], b"logs/storch-0/storch.log");
        assert_eq!(&tar[124..136], b"00000000006\0");
        let mut h = tar[..512].to_vec();
        let stored = u64::from_str_radix(std::str::from_utf8(&h[148..154]).unwrap(), 8).unwrap();
        h[148..156].copy_from_slice(b"        ");
        assert_eq!(stored, h.iter().map(|b| *b as u64).sum::<u64>());
        assert_eq!(&tar[512..518], b"hello\n");
        let gz = a.to_tar_gz(0);
        assert_eq!(&gz[..3], &[0x1f, 0x8b, 8]);
        assert_eq!(&gz[gz.len() - 4..], &(tar.len() as u32).to_le_bytes());
    }
}
