//! One async lock per volume name, for drivers whose arrays cannot make a create of one
//! name atomic (Element names are not unique; E-Series answers a duplicate label with the same
//! 422 as its "created anyway" quirk): creates, clones and destroys of one name take turns
//! within this process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One async lock per volume name, dropped when nobody holds or waits for it.
#[derive(Default)]
pub(crate) struct NameLocks(Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

/// Holds a name's lock; releases it (and forgets an unused lock) when dropped.
pub(crate) struct NameGuard<'a> {
    locks: &'a NameLocks,
    name: String,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl NameLocks {
    pub(crate) async fn lock(&self, name: &str) -> NameGuard<'_> {
        let m = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name.to_string())
            .or_default()
            .clone();
        NameGuard {
            locks: self,
            name: name.to_string(),
            guard: Some(m.lock_owned().await),
        }
    }
}

impl Drop for NameGuard<'_> {
    fn drop(&mut self) {
        self.guard = None;
        let mut map = self.locks.0.lock().unwrap_or_else(|e| e.into_inner());
        if map
            .get(&self.name)
            .is_some_and(|m| Arc::strong_count(m) == 1)
        {
            map.remove(&self.name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_name_at_a_time_and_unused_locks_are_forgotten() {
        let locks = std::sync::Arc::new(NameLocks::default());
        let first = locks.lock("a").await;
        // Another name is not held up.
        drop(locks.lock("b").await);
        let waiter = {
            let locks = locks.clone();
            tokio::spawn(async move {
                let _g = locks.lock("a").await;
            })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "a second lock of one name waits");
        drop(first);
        waiter.await.unwrap();
        assert!(locks.0.lock().unwrap().is_empty(), "no lock is kept");
    }
}
