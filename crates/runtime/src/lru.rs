//! A small least-recently-used map (upstream's `k8s.io/utils/lru`): the event
//! correlator's caches are bounded so a component that reports about many
//! objects does not grow without limit.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

#[derive(Debug)]
pub struct Lru<K, V> {
    capacity: usize,
    tick: u64,
    entries: HashMap<K, (V, u64)>,
    /// Last-use tick → key; the first entry is the least recently used.
    order: BTreeMap<u64, K>,
}

impl<K: Hash + Eq + Clone, V> Lru<K, V> {
    /// A cache of at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> Self {
        Lru {
            capacity: capacity.max(1),
            tick: 0,
            entries: HashMap::new(),
            order: BTreeMap::new(),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    /// The value for `key`, marking it most recently used.
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.tick += 1;
        let tick = self.tick;
        let (value, used) = self.entries.get_mut(key)?;
        self.order.remove(used);
        *used = tick;
        self.order.insert(tick, key.clone());
        Some(value)
    }

    /// Inserts or replaces `key`, evicting the least recently used entry when full.
    pub fn insert(&mut self, key: K, value: V) {
        self.tick += 1;
        if let Some((_, used)) = self.entries.remove(&key) {
            self.order.remove(&used);
        } else if self.entries.len() >= self.capacity
            && let Some((_, oldest)) = self.order.pop_first()
        {
            self.entries.remove(&oldest);
        }
        self.order.insert(self.tick, key.clone());
        self.entries.insert(key, (value, self.tick));
    }

    /// The value for `key`, inserting `make()` first when absent; either way
    /// the entry becomes the most recently used.
    pub fn get_or_insert_with(&mut self, key: &K, make: impl FnOnce() -> V) -> &mut V {
        self.tick += 1;
        let tick = self.tick;
        if let Some((_, used)) = self.entries.get_mut(key) {
            self.order.remove(used);
            *used = tick;
        } else if self.entries.len() >= self.capacity
            && let Some((_, oldest)) = self.order.pop_first()
        {
            self.entries.remove(&oldest);
        }
        self.order.insert(tick, key.clone());
        let entry = self
            .entries
            .entry(key.clone())
            .or_insert_with(|| (make(), tick));
        &mut entry.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used() {
        let mut c = Lru::new(2);
        c.insert("a", 1);
        c.insert("b", 2);
        // Touch "a" so "b" becomes the oldest.
        assert_eq!(c.get_mut(&"a").copied(), Some(1));
        c.insert("c", 3);
        assert_eq!(c.len(), 2);
        assert!(c.get_mut(&"b").is_none());
        assert_eq!(c.get_mut(&"a").copied(), Some(1));
        assert_eq!(c.get_mut(&"c").copied(), Some(3));
    }

    #[test]
    fn replacing_does_not_evict() {
        let mut c = Lru::new(2);
        c.insert("a", 1);
        c.insert("b", 2);
        c.insert("a", 10);
        assert_eq!(c.len(), 2);
        assert_eq!(c.get_mut(&"a").copied(), Some(10));
        assert_eq!(c.get_mut(&"b").copied(), Some(2));
    }

    #[test]
    fn get_or_insert_with_touches_and_creates() {
        let mut c = Lru::new(2);
        *c.get_or_insert_with(&"a", || 1) += 1;
        *c.get_or_insert_with(&"a", || 100) += 1;
        c.insert("b", 0);
        c.get_or_insert_with(&"a", || 100);
        c.insert("c", 0); // evicts "b", the least recently used
        assert_eq!(c.get_mut(&"a").copied(), Some(3));
        assert!(c.get_mut(&"b").is_none());
    }
}
