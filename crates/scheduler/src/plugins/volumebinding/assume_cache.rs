//! Volumes and claims Reserve promised to pods whose binding is still in
//! flight (upstream's PV and PVC assume caches). An assumed object hides
//! the informer's copy it was made from, so the next cycles neither hand
//! the same volume to another claim nor provision a claim elsewhere; once
//! the informer delivers a newer version (our write, or anyone's), that
//! version wins, as upstream's cache does.

use std::collections::HashMap;
use std::sync::Arc;

use berth_api::storage::volume_class;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;

use crate::framework::StorageSnapshot;
use crate::framework::storage::claim_key;

#[derive(Clone, Debug)]
struct Assumed<T> {
    /// The pod whose Reserve assumed it (`namespace/name`).
    pod: String,
    object: Arc<T>,
}

#[derive(Debug, Default)]
pub struct AssumeCache {
    volumes: HashMap<String, Assumed<PersistentVolume>>,
    /// By `namespace/name`.
    claims: HashMap<String, Assumed<PersistentVolumeClaim>>,
}

impl AssumeCache {
    pub fn assume_volume(&mut self, pod: &str, pv: PersistentVolume) {
        let name = pv.metadata.name.clone().unwrap_or_default();
        self.volumes.insert(
            name,
            Assumed {
                pod: pod.to_string(),
                object: Arc::new(pv),
            },
        );
    }

    pub fn assume_claim(&mut self, pod: &str, c: PersistentVolumeClaim) {
        self.claims.insert(
            claim_key(&c),
            Assumed {
                pod: pod.to_string(),
                object: Arc::new(c),
            },
        );
    }

    /// Drops what `pod` assumed (upstream's Restore for its objects).
    pub fn restore_pod(&mut self, pod: &str) {
        self.volumes.retain(|_, a| a.pod != pod);
        self.claims.retain(|_, a| a.pod != pod);
    }

    pub fn is_empty(&self) -> bool {
        self.volumes.is_empty() && self.claims.is_empty()
    }

    /// The storage objects as this cycle should see them: the informers'
    /// snapshot with the assumptions still newer than it laid over.
    pub fn view<'a>(&self, storage: &'a StorageSnapshot) -> View<'a> {
        let mut volumes = HashMap::new();
        for (name, a) in &self.volumes {
            if let Some(pv) = storage.volume(name)
                && pv.metadata.resource_version == a.object.metadata.resource_version
            {
                volumes.insert(name.clone(), a.object.clone());
            }
        }
        let mut claims = HashMap::new();
        for (key, a) in &self.claims {
            if let Some(c) = storage.claims.get(key)
                && c.metadata.resource_version == a.object.metadata.resource_version
            {
                claims.insert(key.clone(), a.object.clone());
            }
        }
        View {
            storage,
            volumes,
            claims,
        }
    }
}

/// A snapshot with assumed objects over it.
pub struct View<'a> {
    storage: &'a StorageSnapshot,
    volumes: HashMap<String, Arc<PersistentVolume>>,
    claims: HashMap<String, Arc<PersistentVolumeClaim>>,
}

impl<'a> View<'a> {
    /// The informers' snapshot alone.
    pub fn plain(storage: &'a StorageSnapshot) -> Self {
        Self {
            storage,
            volumes: HashMap::new(),
            claims: HashMap::new(),
        }
    }

    pub fn claim(&self, namespace: &str, name: &str) -> Option<Arc<PersistentVolumeClaim>> {
        let key = format!("{namespace}/{name}");
        self.claims
            .get(&key)
            .or_else(|| self.storage.claims.get(&key))
            .cloned()
    }

    pub fn volume(&self, name: &str) -> Option<Arc<PersistentVolume>> {
        self.volumes
            .get(name)
            .or_else(|| self.storage.volume(name))
            .cloned()
    }

    pub fn class(&self, name: &str) -> Option<&'a Arc<StorageClass>> {
        self.storage.class(name)
    }

    /// The volumes of one class, in name order (upstream's ListPVs).
    pub fn volumes_of_class(&self, class: &str) -> Vec<Arc<PersistentVolume>> {
        self.storage
            .volumes
            .iter()
            .filter_map(|(name, pv)| {
                let pv = self.volumes.get(name).unwrap_or(pv);
                (volume_class(pv) == class).then(|| pv.clone())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn pv(name: &str, rv: &str, class: &str) -> PersistentVolume {
        PersistentVolume {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::core::v1::PersistentVolumeSpec {
                storage_class_name: Some(class.into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn assumed_objects_hide_their_base_until_the_informer_moves_on() {
        let storage = StorageSnapshot::of(vec![], vec![pv("a", "5", "fast")], vec![], vec![]);
        let mut cache = AssumeCache::default();
        let mut assumed = pv("a", "5", "fast");
        assumed.metadata.annotations = Some([("assumed".to_string(), "yes".to_string())].into());
        cache.assume_volume("ns/p", assumed);
        let has_mark = |v: &View<'_>| {
            v.volume("a")
                .and_then(|p| p.metadata.annotations.clone())
                .is_some_and(|a| a.contains_key("assumed"))
        };
        assert!(has_mark(&cache.view(&storage)));
        assert_eq!(cache.view(&storage).volumes_of_class("fast").len(), 1);
        assert!(!has_mark(&View::plain(&storage)));
        // A newer informer version wins.
        let newer = StorageSnapshot::of(vec![], vec![pv("a", "6", "fast")], vec![], vec![]);
        assert!(!has_mark(&cache.view(&newer)));
        // Restoring the pod's assumptions shows the informer's copy again.
        cache.restore_pod("ns/other");
        assert!(has_mark(&cache.view(&storage)));
        cache.restore_pod("ns/p");
        assert!(!has_mark(&cache.view(&storage)));
        assert!(cache.is_empty());
    }
}
