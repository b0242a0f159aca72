//! What the volume plugins see of the cluster's storage objects: claims,
//! volumes, classes and CSINodes (upstream reads them through listers of
//! the scheduler's shared informers). The informers keep one
//! `SharedStorage`; each cycle takes its current `StorageSnapshot`, so
//! a cycle never sees a half-applied change.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};

/// Claims by `namespace/name`; volumes, classes and CSINodes by name.
#[derive(Clone, Debug, Default)]
pub struct StorageSnapshot {
    pub claims: HashMap<String, Arc<PersistentVolumeClaim>>,
    /// In name order, so a search for a matching volume is deterministic.
    pub volumes: BTreeMap<String, Arc<PersistentVolume>>,
    pub classes: HashMap<String, Arc<StorageClass>>,
    pub csi_nodes: HashMap<String, Arc<CSINode>>,
}

impl StorageSnapshot {
    pub fn claim(&self, namespace: &str, name: &str) -> Option<&Arc<PersistentVolumeClaim>> {
        self.claims.get(&format!("{namespace}/{name}"))
    }

    pub fn volume(&self, name: &str) -> Option<&Arc<PersistentVolume>> {
        self.volumes.get(name)
    }

    pub fn class(&self, name: &str) -> Option<&Arc<StorageClass>> {
        self.classes.get(name)
    }

    pub fn csi_node(&self, name: &str) -> Option<&Arc<CSINode>> {
        self.csi_nodes.get(name)
    }

    /// Builds a snapshot from plain objects (tests, tools).
    pub fn of(
        claims: Vec<PersistentVolumeClaim>,
        volumes: Vec<PersistentVolume>,
        classes: Vec<StorageClass>,
        csi_nodes: Vec<CSINode>,
    ) -> Self {
        let mut s = Self::default();
        for c in claims {
            s.claims.insert(claim_key(&c), Arc::new(c));
        }
        for v in volumes {
            s.volumes
                .insert(v.metadata.name.clone().unwrap_or_default(), Arc::new(v));
        }
        for c in classes {
            s.classes
                .insert(c.metadata.name.clone().unwrap_or_default(), Arc::new(c));
        }
        for n in csi_nodes {
            s.csi_nodes
                .insert(n.metadata.name.clone().unwrap_or_default(), Arc::new(n));
        }
        s
    }
}

/// `namespace/name` of a claim.
pub fn claim_key(c: &PersistentVolumeClaim) -> String {
    format!(
        "{}/{}",
        c.metadata.namespace.as_deref().unwrap_or("default"),
        c.metadata.name.as_deref().unwrap_or_default()
    )
}

/// The informers' live view, written by the watch tasks and read by the
/// scheduling cycle (once per cycle) and by PreBind (while it waits).
#[derive(Debug, Default)]
pub struct SharedStorage {
    current: RwLock<Arc<StorageSnapshot>>,
    changed: AtomicBool,
}

impl SharedStorage {
    /// The current view; cheap (one Arc).
    pub fn current(&self) -> Arc<StorageSnapshot> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The current view when it changed since the last call.
    pub fn take_changes(&self) -> Option<Arc<StorageSnapshot>> {
        self.changed
            .swap(false, Ordering::AcqRel)
            .then(|| self.current())
    }

    /// Changes the view; the maps are copied only while a cycle still holds
    /// the previous one.
    pub fn update(&self, f: impl FnOnce(&mut StorageSnapshot)) {
        let mut w = self.current.write().unwrap_or_else(|e| e.into_inner());
        f(Arc::make_mut(&mut w));
        self.changed.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_storage_reports_changes_once() {
        let s = SharedStorage::default();
        assert!(s.take_changes().is_none());
        let held = s.current();
        s.update(|v| {
            v.claims.insert("ns/c".into(), Arc::default());
        });
        // The cycle's view did not move under it.
        assert!(held.claims.is_empty());
        assert_eq!(s.take_changes().map(|v| v.claims.len()), Some(1));
        assert!(s.take_changes().is_none());
    }
}
