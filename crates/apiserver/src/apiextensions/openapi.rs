//! OpenAPI v3 documents of custom group-versions (`/openapi/v3/apis/<group>/<version>`),
//! built from the CRDs' schemas whenever the served custom set changes, and the
//! `/openapi/v3` index that lists them beside the built-in documents.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use berth_api::openapi;
use berth_api::registry;
use bytes::Bytes;

/// The documents for one generation of the custom set.
pub struct Documents {
    generation: u64,
    pub index: Bytes,
    documents: BTreeMap<String, Bytes>,
}

impl Documents {
    /// The document at a group-version path, custom or built-in.
    pub fn get(&self, path: &str) -> Option<Bytes> {
        let path = path.trim_matches('/');
        if let Some(d) = self.documents.get(path) {
            return Some(d.clone());
        }
        // The built-in documents live for the process (a `LazyLock`).
        openapi::cached()
            .get(path)
            .map(|d| Bytes::from_static(d.bytes.as_slice()))
    }
}

static CURRENT: Mutex<Option<Arc<Documents>>> = Mutex::new(None);

/// The documents for the custom resources served now.
pub fn current() -> Arc<Documents> {
    let generation = registry::custom_generation();
    let mut guard = match CURRENT.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    if let Some(d) = guard.as_ref()
        && d.generation == generation
    {
        return d.clone();
    }
    let built = Arc::new(build(generation));
    *guard = Some(built.clone());
    built
}

fn build(generation: u64) -> Documents {
    let builtin = openapi::cached();
    let mut documents = BTreeMap::new();
    let mut hashes: Vec<(String, String)> = builtin
        .documents
        .iter()
        .map(|(p, r)| (p.clone(), r.hash.clone()))
        .collect();
    let mut gvs: Vec<(&'static str, &'static str)> = Vec::new();
    for rt in registry::custom() {
        if !gvs.contains(&(rt.group, rt.version)) {
            gvs.push((rt.group, rt.version));
        }
    }
    for (group, version) in gvs {
        let path = format!("apis/{group}/{version}");
        if builtin.documents.contains_key(&path) {
            continue;
        }
        let Some(doc) = openapi::document(&path) else {
            continue;
        };
        let Ok(bytes) = serde_json::to_vec(&doc) else {
            continue;
        };
        hashes.push((path.clone(), openapi::hash(&bytes)));
        documents.insert(path, Bytes::from(bytes));
    }
    let index = openapi::index(hashes.iter().map(|(p, h)| (p.as_str(), h.as_str())));
    Documents {
        generation,
        index: Bytes::from(serde_json::to_vec(&index).unwrap_or_default()),
        documents,
    }
}
