//! The bincode form of a [`StorageClassConfig`]: schema 1's six fields, so every recorded
//! class (events and checkpoints) decodes as before. Driver parameters travel inside the
//! `attributes` map under keys no attribute can have (attribute names are registered and
//! never start with `@`): `@param:<name>` → the value, `@sealed` → the sealed secrets as hex
//! (`nonce` then ciphertext). Decoding splits them back out.

use std::collections::BTreeMap;

use bincode::de::Decoder;
use bincode::enc::Encoder;
use bincode::error::{DecodeError, EncodeError};
use bincode::{Decode, Encode};

use super::{PoolSelector, StorageClassConfig};
use crate::model::{Request, Sealed};

const PARAM_PREFIX: &str = "@param:";
const SEALED_KEY: &str = "@sealed";

impl Encode for StorageClassConfig {
    fn encode<E: Encoder>(&self, e: &mut E) -> Result<(), EncodeError> {
        self.version.encode(e)?;
        self.name.encode(e)?;
        if self.parameters.is_empty() && self.sealed.is_none() {
            self.attributes.encode(e)?;
        } else {
            let mut attributes = self.attributes.clone();
            for (k, v) in &self.parameters {
                attributes.insert(format!("{PARAM_PREFIX}{k}"), Request::String(v.clone()));
            }
            if let Some(s) = &self.sealed {
                let text = format!("{}{}", hex::encode(s.nonce), hex::encode(&s.ciphertext));
                attributes.insert(SEALED_KEY.to_string(), Request::String(text));
            }
            attributes.encode(e)?;
        }
        self.storage_pools.encode(e)?;
        self.additional_storage_pools.encode(e)?;
        self.exclude_storage_pools.encode(e)
    }
}

impl<Context> Decode<Context> for StorageClassConfig {
    fn decode<D: Decoder<Context = Context>>(d: &mut D) -> Result<Self, DecodeError> {
        let version = String::decode(d)?;
        let name = String::decode(d)?;
        let mut attributes = BTreeMap::<String, Request>::decode(d)?;
        let storage_pools = PoolSelector::decode(d)?;
        let additional_storage_pools = PoolSelector::decode(d)?;
        let exclude_storage_pools = PoolSelector::decode(d)?;
        let mut parameters = BTreeMap::new();
        let mut sealed = None;
        let hidden: Vec<String> = attributes
            .keys()
            .filter(|k| k.starts_with('@'))
            .cloned()
            .collect();
        for key in hidden {
            let Some(Request::String(value)) = attributes.remove(&key) else {
                return Err(DecodeError::Other("a class parameter is not a string"));
            };
            if key == SEALED_KEY {
                sealed = Some(unhex_sealed(&value)?);
            } else if let Some(name) = key.strip_prefix(PARAM_PREFIX) {
                parameters.insert(name.to_string(), value);
            } else {
                return Err(DecodeError::Other("unknown hidden key in a class"));
            }
        }
        Ok(StorageClassConfig {
            version,
            name,
            attributes,
            storage_pools,
            additional_storage_pools,
            exclude_storage_pools,
            parameters,
            sealed,
        })
    }
}

bincode::impl_borrow_decode!(StorageClassConfig);

fn unhex_sealed(text: &str) -> Result<Sealed, DecodeError> {
    let bytes =
        hex::decode(text).map_err(|_| DecodeError::Other("sealed class parameters: bad hex"))?;
    if bytes.len() < 12 {
        return Err(DecodeError::Other("sealed class parameters: too short"));
    }
    let (nonce, ciphertext) = bytes.split_at(12);
    Ok(Sealed {
        nonce: nonce.try_into().expect("12 bytes"),
        ciphertext: ciphertext.to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(c: &StorageClassConfig) -> StorageClassConfig {
        let cfg = bincode::config::standard();
        let bytes = bincode::encode_to_vec(c, cfg).unwrap();
        let (back, used): (StorageClassConfig, usize) =
            bincode::decode_from_slice(&bytes, cfg).unwrap();
        assert_eq!(used, bytes.len());
        back
    }

    /// The six fields of schema 1, as the derive wrote them.
    #[derive(bincode::Encode)]
    struct Schema1 {
        version: String,
        name: String,
        attributes: BTreeMap<String, Request>,
        storage_pools: PoolSelector,
        additional_storage_pools: PoolSelector,
        exclude_storage_pools: PoolSelector,
    }

    #[test]
    fn schema_1_bytes_are_unchanged_without_parameters() {
        let mut attributes = BTreeMap::new();
        attributes.insert("media".to_string(), Request::String("ssd".into()));
        let mut pools = PoolSelector::new();
        pools.insert("b".into(), vec!["p".into()]);
        let c = StorageClassConfig {
            version: "1".into(),
            name: "gold".into(),
            attributes: attributes.clone(),
            storage_pools: pools.clone(),
            ..Default::default()
        };
        let old = Schema1 {
            version: "1".into(),
            name: "gold".into(),
            attributes,
            storage_pools: pools,
            additional_storage_pools: PoolSelector::new(),
            exclude_storage_pools: PoolSelector::new(),
        };
        let cfg = bincode::config::standard();
        assert_eq!(
            bincode::encode_to_vec(&c, cfg).unwrap(),
            bincode::encode_to_vec(&old, cfg).unwrap()
        );
        assert_eq!(round_trip(&c), c);
    }

    #[test]
    fn parameters_and_sealed_secrets_round_trip() {
        let mut c = StorageClassConfig {
            version: "1".into(),
            name: "nx".into(),
            ..Default::default()
        };
        c.parameters.insert("volumeGroup".into(), "tank/a".into());
        c.parameters
            .insert("chapSecret".into(), "<redacted>".into());
        c.sealed = Some(Sealed {
            nonce: [7; 12],
            ciphertext: vec![1, 2, 3],
        });
        let back = round_trip(&c);
        assert_eq!(back, c);
        assert!(back.attributes.is_empty());
    }
}
