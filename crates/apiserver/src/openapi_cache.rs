//! Serialised OpenAPI v3 documents, generated once on first use and kept as
//! bytes with a content hash (clients cache by `?hash=`).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::OnceLock;

use bytes::Bytes;
use serde_json::{Value, json};

#[derive(Default)]
pub struct OpenApiCache {
    docs: OnceLock<BTreeMap<String, (Bytes, String)>>,
}

fn content_hash(bytes: &[u8]) -> String {
    // Two differently seeded hashes: collisions would only cost a stale client cache.
    let mut out = String::new();
    for seed in [0u64, 0x9e37_79b9_7f4a_7c15] {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        seed.hash(&mut h);
        bytes.hash(&mut h);
        out.push_str(&format!("{:016X}", h.finish()));
    }
    out
}

impl OpenApiCache {
    fn docs(&self) -> &BTreeMap<String, (Bytes, String)> {
        self.docs.get_or_init(|| {
            berth_api::openapi::paths()
                .into_iter()
                .filter_map(|p| {
                    let doc = berth_api::openapi::document(&p)?;
                    let bytes = Bytes::from(serde_json::to_vec(&doc).ok()?);
                    let hash = content_hash(&bytes);
                    Some((p, (bytes, hash)))
                })
                .collect()
        })
    }

    /// Builds every document now (the server calls this in the background at start).
    pub fn warm(&self) {
        let _ = self.docs();
    }

    pub fn index(&self) -> Value {
        let paths: serde_json::Map<String, Value> = self
            .docs()
            .iter()
            .map(|(p, (_, h))| (p.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={h}")})))
            .collect();
        json!({ "paths": paths })
    }

    /// The document at `api/v1`, `apis/apps/v1`, …
    pub fn document(&self, path: &str) -> Option<Bytes> {
        self.docs().get(path.trim_end_matches('/')).map(|(b, _)| b.clone())
    }
}
