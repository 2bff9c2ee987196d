//! File modes of what storch keeps on disk: the data dir and the log's dir are `0700`, the
//! log's files `0600`, so no other user on the host reads volume names, access details or the
//! audit trail. A dir storch finds looser (an operator's `chmod`, one made by an older storch)
//! is reported and left as it is; the log's own files are set to `0600` at every open (sled
//! creates them with the process umask).

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

/// Mode bits that give access to anyone but the owner.
const OTHERS: u32 = 0o077;

/// Creates `dir` (and missing parents) with mode `0700`. An existing dir is left as it is;
/// the answer is a warning when group or others may use it.
pub fn private_dir(dir: &Path) -> std::io::Result<Option<String>> {
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        return Ok(None);
    }
    Ok(loosened(dir, 0o700))
}

/// Sets every file under `dir` to `0600` and every dir below it to `0700`.
pub fn restrict_tree(dir: &Path) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.is_dir() {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
            restrict_tree(&path)?;
        } else if meta.is_file() {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        }
    }
    Ok(())
}

/// A warning when `path`'s mode gives group or others any access.
fn loosened(path: &Path, want: u32) -> Option<String> {
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & OTHERS != 0).then(|| {
        format!(
            "{} has mode {mode:04o}: other users on this host can read it; \
             storch keeps it {want:04o} (chmod {want:o} {})",
            path.display(),
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_dir_is_private_and_a_loosened_one_is_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        assert_eq!(private_dir(&dir).unwrap(), None);
        assert_eq!(mode(&dir), 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let warning = private_dir(&dir).unwrap().unwrap();
        assert!(
            warning.contains("mode 0755") && warning.contains("chmod 700"),
            "{warning}"
        );
        assert_eq!(mode(&dir), 0o755, "an operator's mode is left alone");
    }

    #[test]
    fn restrict_tree_makes_files_0600_and_dirs_0700() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("blobs")).unwrap();
        std::fs::write(tmp.path().join("db"), b"x").unwrap();
        std::fs::write(tmp.path().join("blobs/1"), b"x").unwrap();
        restrict_tree(tmp.path()).unwrap();
        assert_eq!(mode(&tmp.path().join("db")), 0o600);
        assert_eq!(mode(&tmp.path().join("blobs")), 0o700);
        assert_eq!(mode(&tmp.path().join("blobs/1")), 0o600);
    }
}
