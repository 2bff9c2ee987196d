//! Where a local backend's pools may live: below the roots the operator allows, never in or
//! around storch's own files, and never in or around another backend's pool. Checked before
//! the driver touches anything (a refused config creates no directory).

use std::io;
use std::path::{Component, Path, PathBuf};

use super::config::LocalConfig;
use crate::drivers::{DriverError, DriverResult};

/// What a local backend's pool paths are checked against.
#[derive(Debug, Clone, Default)]
pub struct PoolRules {
    /// Directories the pools must lie below; `None`: anywhere (a config the operator wrote,
    /// such as the `serve --config` file, is trusted).
    pub roots: Option<Vec<PathBuf>>,
    /// Paths no pool may be, lie in or contain (the event log's directory, the secrets key).
    pub reserved: Vec<PathBuf>,
    /// The pools of the other local backends: backend, pool and path as configured.
    pub taken: Vec<(String, String, PathBuf)>,
}

/// `path` with every symbolic link of its existing part resolved, and `.` and `..` taken out;
/// the part that does not exist yet is appended as written (it can hold no link).
pub fn resolve(path: &Path) -> io::Result<PathBuf> {
    let path = std::path::absolute(path)?;
    let mut out = PathBuf::new();
    let mut exists = true;
    for part in path.components() {
        match part {
            Component::Prefix(_) | Component::RootDir => out.push(part.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => {
                out.push(name);
                if exists {
                    match std::fs::canonicalize(&out) {
                        Ok(real) => out = real,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => exists = false,
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }
    Ok(out)
}

fn overlaps(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

fn shown(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks every pool of `cfg` against `rules`; the error names the pool's field.
pub fn check(cfg: &LocalConfig, rules: &PoolRules) -> DriverResult<()> {
    let resolve_or = |field: &str, p: &Path| {
        resolve(p).map_err(|e| {
            DriverError::Invalid(format!(
                "invalid value for {field}: cannot resolve {}: {e}",
                p.display()
            ))
        })
    };
    let roots = match &rules.roots {
        Some(roots) => Some(
            roots
                .iter()
                .map(|r| resolve_or("the allowed root", r))
                .collect::<DriverResult<Vec<_>>>()?,
        ),
        None => None,
    };
    let reserved: Vec<PathBuf> = rules
        .reserved
        .iter()
        .filter_map(|r| resolve(r).ok())
        .collect();
    let mut taken = Vec::new();
    for (backend, pool, path) in &rules.taken {
        if let Ok(real) = resolve(path) {
            taken.push((backend.as_str(), pool.as_str(), real));
        }
    }
    for pool in &cfg.pools {
        let field = format!("pools.{}.path", pool.name);
        let real = resolve_or(&field, &pool.path)?;
        if let Some(roots) = &roots
            && !roots.iter().any(|r| real.starts_with(r) && real != *r)
        {
            return Err(DriverError::Invalid(format!(
                "invalid value for {field}: {} is not below a directory the operator allows for \
                 local pools ({}); the operator allows more with `storch serve --local-root DIR`, \
                 or declares the backend in the `serve --config` file",
                real.display(),
                shown(roots)
            )));
        }
        if let Some(r) = reserved.iter().find(|r| overlaps(&real, r)) {
            return Err(DriverError::Invalid(format!(
                "invalid value for {field}: {} overlaps storch's own {}",
                real.display(),
                r.display()
            )));
        }
        if let Some((backend, other, path)) = taken.iter().find(|(_, _, p)| overlaps(&real, p)) {
            return Err(DriverError::Invalid(format!(
                "invalid value for {field}: {} overlaps pool {other} of backend {backend} ({}); \
                 two backends never share a directory",
                real.display(),
                path.display()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::drivers::CommonConfig;

    fn cfg(pools: serde_json::Value) -> LocalConfig {
        let doc = json!({"version": 1, "storageDriverName": "local", "backendName": "b",
                         "pools": pools});
        LocalConfig::parse(&doc, &CommonConfig::parse(&doc).unwrap()).unwrap()
    }

    fn message(r: DriverResult<()>) -> String {
        match r {
            Err(DriverError::Invalid(m)) => m,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn resolve_follows_links_and_keeps_the_missing_part() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, tmp.path().join("link")).unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        assert_eq!(
            resolve(&tmp.path().join("link/new/./x/../y")).unwrap(),
            base.join("real/new/y")
        );
        assert_eq!(
            resolve(Path::new("/etc/../etc")).unwrap(),
            Path::new("/etc")
        );
    }

    #[test]
    fn pools_must_lie_below_an_allowed_root() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let rules = PoolRules {
            roots: Some(vec![root.clone()]),
            ..PoolRules::default()
        };
        check(&cfg(json!({"p": {"path": root.join("p")}})), &rules).unwrap();
        let m = message(check(&cfg(json!({"p": {"path": "/etc"}})), &rules));
        assert!(
            m.starts_with("invalid value for pools.p.path: /etc is not below"),
            "{m}"
        );
        assert!(m.contains("--local-root"), "{m}");
        // `..` and a link out of the root do not escape it; the root itself is not a pool.
        for escape in [root.join("../elsewhere"), root.clone()] {
            let m = message(check(&cfg(json!({"p": {"path": escape}})), &rules));
            assert!(m.contains("is not below"), "{m}");
        }
        std::os::unix::fs::symlink("/etc", root.join("out")).unwrap();
        let m = message(check(
            &cfg(json!({"p": {"path": root.join("out/x")}})),
            &rules,
        ));
        assert!(m.contains("/etc/x is not below"), "{m}");
        // The operator's own config is not bound to roots.
        check(
            &cfg(json!({"p": {"path": "/etc/x"}})),
            &PoolRules::default(),
        )
        .unwrap();
    }

    #[test]
    fn pools_never_overlap_another_backend_or_storchs_files() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("data/log");
        let rules = PoolRules {
            roots: None,
            reserved: vec![log.clone()],
            taken: vec![("other".into(), "fast".into(), tmp.path().join("a"))],
        };
        for (path, says) in [
            (tmp.path().join("a"), "overlaps pool fast of backend other"),
            (
                tmp.path().join("a/b"),
                "overlaps pool fast of backend other",
            ),
            (tmp.path().to_path_buf(), "overlaps"),
            (log.join("x"), "overlaps storch's own"),
            (tmp.path().join("data"), "overlaps storch's own"),
        ] {
            let m = message(check(&cfg(json!({"p": {"path": path}})), &rules));
            assert!(m.contains(says), "{path:?}: {m}");
        }
        check(&cfg(json!({"p": {"path": tmp.path().join("b")}})), &rules).unwrap();
    }
}
