//! The `.tar.gz` of `storch logs --archive`: regular files under one timestamp, written with
//! the `tar` and `flate2` crates.

use std::io::Write;

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
    pub fn to_tar_gz(&self, mtime: u64) -> std::io::Result<Vec<u8>> {
        let gz = flate2::GzBuilder::new()
            .mtime(mtime as u32)
            .write(Vec::new(), flate2::Compression::default());
        let mut tar = tar::Builder::new(gz);
        for (path, content) in &self.entries {
            let mut header = tar::Header::new_ustar();
            header.set_size(content.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(mtime);
            header.set_entry_type(tar::EntryType::Regular);
            tar.append_data(&mut header, path, content.as_slice())?;
        }
        let mut gz = tar.into_inner()?;
        gz.flush()?;
        gz.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn entries_read_back_with_their_paths_contents_and_time() {
        let mut a = Archive::default();
        a.add("logs/storch-0/storch.log", "hello\n");
        let long = format!("logs/{}/storch.log", "p".repeat(120));
        a.add(&long, vec![7u8; 70_000]);
        let gz = a.to_tar_gz(1_700_000_000).unwrap();
        assert_eq!(&gz[..3], &[0x1f, 0x8b, 8]);
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(gz.as_slice()));
        let mut seen = Vec::new();
        for entry in tar.entries().unwrap() {
            let mut entry = entry.unwrap();
            let path = entry.path().unwrap().to_string_lossy().into_owned();
            assert_eq!(entry.header().mtime().unwrap(), 1_700_000_000);
            let mut content = Vec::new();
            entry.read_to_end(&mut content).unwrap();
            seen.push((path, content));
        }
        assert_eq!(
            seen,
            [
                ("logs/storch-0/storch.log".to_string(), b"hello\n".to_vec()),
                (long, vec![7u8; 70_000]),
            ]
        );
    }
}
