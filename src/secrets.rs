//! Secrets: kept out of events, logs and API output.
//!
//! Backend config documents are split before anything is recorded: every value under a
//! secret-looking key (`password`, `secret`, `token`, CHAP secrets, private keys, …) and the
//! user-info part of URLs is moved out of the document into a map that is sealed
//! (ChaCha20-Poly1305) with a 256-bit key kept in `DATA_DIR/secret.key` (mode 0600). Events
//! carry only the redacted document and the sealed blob, so a copy of the log (or an etcd
//! replica) reveals nothing without the key.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use chacha20poly1305::aead::{Aead, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use serde_json::Value;

use crate::model::{AccessInfo, Sealed, StorageClassConfig};

/// The name of the key file inside the data dir.
pub const KEY_FILE: &str = "secret.key";

/// What replaces a secret in anything shown to people.
pub const REDACTED: &str = crate::model::storage_class::driver_parameters::REDACTED;

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("secret key file {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("secret key file {path} is not 32 bytes")]
    BadKey { path: String },
    #[error(
        "sealed secrets cannot be opened with this key (instances that replicate one log must \
         share --secrets-key-file)"
    )]
    Unseal,
}

/// Whether a config key names a secret (case-insensitive).
pub fn is_secret_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("password")
        || k.contains("secret")
        || k.contains("token")
        || k.contains("privatekey")
        || k == "key"
        || k == "passphrase"
}

/// Splits secrets out of a config document, in place. Returns path → value for every removed
/// secret (paths are JSON pointers). URL user-info (`https://user:pass@host`) is cut out of
/// string values and kept as a secret too.
pub fn split(doc: &mut Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    split_at(doc, String::new(), &mut out);
    out
}

fn split_at(v: &mut Value, path: String, out: &mut BTreeMap<String, Value>) {
    match v {
        Value::Object(map) => {
            let secret_keys: Vec<String> =
                map.keys().filter(|k| is_secret_key(k)).cloned().collect();
            for k in secret_keys {
                if let Some(val) = map.remove(&k) {
                    out.insert(format!("{path}/{}", escape(&k)), val);
                }
            }
            for (k, child) in map.iter_mut() {
                split_at(child, format!("{path}/{}", escape(k)), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter_mut().enumerate() {
                split_at(child, format!("{path}/{i}"), out);
            }
        }
        Value::String(s) => {
            if let Some((clean, userinfo)) = cut_userinfo(s) {
                out.insert(format!("{path}#userinfo"), Value::String(userinfo));
                *s = clean;
            }
        }
        _ => {}
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// `scheme://user:pass@host/…` → (`scheme://host/…`, `user:pass`).
fn cut_userinfo(s: &str) -> Option<(String, String)> {
    let scheme_end = s.find("://")? + 3;
    let rest = &s[scheme_end..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let at = rest[..authority_end].rfind('@')?;
    Some((
        format!("{}{}", &s[..scheme_end], &rest[at + 1..]),
        rest[..at].to_string(),
    ))
}

/// Puts secrets split by [`split`] back into a document.
pub fn merge(doc: &mut Value, secrets: &BTreeMap<String, Value>) {
    for (path, val) in secrets {
        if let Some(ptr) = path.strip_suffix("#userinfo") {
            if let (Some(Value::String(s)), Some(info)) = (doc.pointer_mut(ptr), val.as_str())
                && let Some(i) = s.find("://")
            {
                s.insert_str(i + 3, &format!("{info}@"));
            }
            continue;
        }
        let Some(split_at) = path.rfind('/') else {
            continue;
        };
        let (parent, key) = (&path[..split_at], &path[split_at + 1..]);
        let key = key.replace("~1", "/").replace("~0", "~");
        let target = if parent.is_empty() {
            Some(&mut *doc)
        } else {
            doc.pointer_mut(parent)
        };
        if let Some(Value::Object(map)) = target {
            map.insert(key, val.clone());
        }
    }
}

/// The data dir's sealing key.
#[derive(Clone)]
pub struct SecretBox {
    cipher: ChaCha20Poly1305,
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretBox(..)")
    }
}

impl SecretBox {
    /// Loads `dir/secret.key`, creating it (mode 0600) with a random key if missing.
    pub fn load_or_create(dir: &Path) -> Result<SecretBox, SecretError> {
        let path = dir.join(KEY_FILE);
        match std::fs::read(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let key: [u8; 32] = rand::random();
                let io = |source| SecretError::Io {
                    path: path.display().to_string(),
                    source,
                };
                let mut opts = std::fs::OpenOptions::new();
                opts.write(true).create_new(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
                let mut f = opts.open(&path).map_err(io)?;
                f.write_all(&key).map_err(io)?;
                f.sync_all().map_err(io)?;
                Ok(SecretBox::from_key(key))
            }
            read => Self::from_read(&path, read),
        }
    }

    /// Loads a key file that must exist: 32 bytes, e.g. `head -c 32 /dev/urandom > FILE`
    /// (instances that replicate one log share it).
    pub fn load(path: &Path) -> Result<SecretBox, SecretError> {
        Self::from_read(path, std::fs::read(path))
    }

    fn from_read(path: &Path, read: std::io::Result<Vec<u8>>) -> Result<SecretBox, SecretError> {
        let key = read.map_err(|source| SecretError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let key: [u8; 32] = key.try_into().map_err(|_| SecretError::BadKey {
            path: path.display().to_string(),
        })?;
        Ok(SecretBox::from_key(key))
    }

    pub fn from_key(key: [u8; 32]) -> SecretBox {
        SecretBox {
            cipher: ChaCha20Poly1305::new(Key::from_slice(&key)),
        }
    }

    /// Seals a secret map; `None` when there is nothing to seal.
    pub fn seal(&self, secrets: &BTreeMap<String, Value>) -> Option<Sealed> {
        if secrets.is_empty() {
            return None;
        }
        let plain = serde_json::to_vec(secrets).expect("a map of JSON values serialises");
        let nonce: [u8; 12] = rand::random();
        let ciphertext = self
            .cipher
            .encrypt(Nonce::from_slice(&nonce), plain.as_slice())
            .expect("sealing into memory cannot fail");
        Some(Sealed { nonce, ciphertext })
    }

    pub fn unseal(&self, sealed: &Sealed) -> Result<BTreeMap<String, Value>, SecretError> {
        let plain = self
            .cipher
            .decrypt(
                Nonce::from_slice(&sealed.nonce),
                sealed.ciphertext.as_slice(),
            )
            .map_err(|_| SecretError::Unseal)?;
        serde_json::from_slice(&plain).map_err(|_| SecretError::Unseal)
    }
}

/// Moves the CHAP secrets of access information into a map (for sealing) and blanks them.
pub fn split_access(access: &mut AccessInfo) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for (key, field) in [
        ("iscsiInitiatorSecret", &mut access.iscsi_initiator_secret),
        ("iscsiTargetSecret", &mut access.iscsi_target_secret),
    ] {
        if !field.is_empty() {
            out.insert(key.to_string(), Value::String(std::mem::take(field)));
        }
    }
    out
}

/// Shows CHAP secrets as [`REDACTED`] (API output).
pub fn redact_access(access: &mut AccessInfo) {
    for field in [
        &mut access.iscsi_initiator_secret,
        &mut access.iscsi_target_secret,
    ] {
        if !field.is_empty() {
            *field = REDACTED.to_string();
        }
    }
}

/// A class as it is recorded: the values of its secret parameters (`chapSecret`) replaced by
/// [`REDACTED`] and sealed into `sealed`. A class already sealed is returned as it is.
pub fn seal_class(secrets: &SecretBox, mut class: StorageClassConfig) -> StorageClassConfig {
    if class.sealed.is_some() {
        return class;
    }
    let mut clear = BTreeMap::new();
    for (name, value) in class.parameters.iter_mut() {
        if StorageClassConfig::is_secret_parameter(name) {
            clear.insert(
                name.clone(),
                Value::String(std::mem::replace(value, REDACTED.into())),
            );
        }
    }
    class.sealed = secrets.seal(&clear);
    class
}

/// A recorded class's driver parameters with the sealed values put back (for the driver).
pub fn class_parameters(
    secrets: &SecretBox,
    class: &StorageClassConfig,
) -> Result<BTreeMap<String, String>, SecretError> {
    let mut out = class.parameters.clone();
    if let Some(sealed) = &class.sealed {
        for (name, value) in secrets.unseal(sealed)? {
            if let Value::String(v) = value {
                out.insert(name, v);
            }
        }
    }
    Ok(out)
}

/// Whether a recorded (sealed) class says the same as a class given in clear.
pub fn class_unchanged(
    secrets: &SecretBox,
    recorded: &StorageClassConfig,
    given: &StorageClassConfig,
) -> bool {
    let strip = |c: &StorageClassConfig| StorageClassConfig {
        parameters: BTreeMap::new(),
        sealed: None,
        ..c.clone()
    };
    if strip(recorded) != strip(given) {
        return false;
    }
    let opened = class_parameters(secrets, recorded);
    let given = class_parameters(secrets, given);
    matches!((opened, given), (Ok(a), Ok(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn class_secrets_are_sealed_and_opened() {
        let sb = SecretBox::from_key([3; 32]);
        let given = StorageClassConfig::from_json(
            br#"{"name":"nx","parameters":{"volumeGroup":"tank/a","chapSecret":"canary-chap-42"}}"#,
        )
        .unwrap();
        let recorded = seal_class(&sb, given.clone());
        assert_eq!(recorded.parameters["chapSecret"], REDACTED);
        assert_eq!(recorded.parameters["volumeGroup"], "tank/a");
        let bytes = bincode::encode_to_vec(&recorded, bincode::config::standard()).unwrap();
        assert!(!String::from_utf8_lossy(&bytes).contains("canary-chap-42"));
        assert!(
            !serde_json::to_string(&given)
                .unwrap()
                .contains("canary-chap-42")
        );
        let opened = class_parameters(&sb, &recorded).unwrap();
        assert_eq!(opened["chapSecret"], "canary-chap-42");
        assert!(class_unchanged(&sb, &recorded, &given));
        let mut other = given.clone();
        other
            .parameters
            .insert("chapSecret".into(), "another-secret-1".into());
        assert!(!class_unchanged(&sb, &recorded, &other));
        assert_eq!(seal_class(&sb, recorded.clone()), recorded);
    }

    #[test]
    fn split_and_merge_round_trip() {
        let original = json!({
            "version": 1, "username": "admin", "password": "canary-123",
            "nested": {"chapTargetSecret": "s2", "keep": "x"},
            "EndPoint": "https://admin:pw@10.0.0.1/json-rpc/8.0",
            "list": [{"Password": "p"}]
        });
        let mut doc = original.clone();
        let secrets = split(&mut doc);
        let text = doc.to_string();
        for bad in ["canary-123", "s2", "admin:pw", "\"p\""] {
            assert!(!text.contains(bad), "{bad} leaked into {text}");
        }
        assert_eq!(doc["EndPoint"], "https://10.0.0.1/json-rpc/8.0");
        assert_eq!(doc["username"], "admin");
        merge(&mut doc, &secrets);
        assert_eq!(doc, original);
    }

    #[test]
    fn seal_round_trip_and_wrong_key() {
        let dir = tempfile::tempdir().unwrap();
        let sb = SecretBox::load_or_create(dir.path()).unwrap();
        let again = SecretBox::load_or_create(dir.path()).unwrap();
        let mut m = BTreeMap::new();
        m.insert("/password".to_string(), json!("canary"));
        let sealed = sb.seal(&m).unwrap();
        assert!(!String::from_utf8_lossy(&sealed.ciphertext).contains("canary"));
        assert_eq!(again.unseal(&sealed).unwrap(), m);
        assert!(SecretBox::from_key([1; 32]).unseal(&sealed).is_err());
        assert!(sb.seal(&BTreeMap::new()).is_none());
    }
}
