//! JSON patch and JSON merge patch as the apiserver's PATCH handler
//! (crates/apiserver/src/rest/update.rs) runs them: the body decoded to a `Value`, then
//! `serde_json::from_value::<json_patch::Patch>` and `json_patch::patch` for
//! `application/json-patch+json`, or `json_patch::merge` for
//! `application/merge-patch+json` (object patches only, as there).
//! Input: the first byte picks the content type (bit 0) and the document (bit 1).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

#[path = "../src/docs.rs"]
mod docs;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(patch) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    let mut doc = if pick & 2 == 0 {
        docs::pod()
    } else {
        docs::deployment()
    };
    if pick & 1 == 0 {
        let Ok(ops) = serde_json::from_value::<json_patch::Patch>(patch) else {
            return;
        };
        // No all-or-nothing check: json-patch 4.2 documents that a failed patch is
        // reverted, but a `move` whose target parent is missing loses the moved value
        // (found here: copy, then move /metadata/annotations to /metaXata/x). The
        // apiserver drops the document on any patch error, so that is harmless there.
        if let Err(e) = json_patch::patch(&mut doc, &ops) {
            let _ = e.to_string();
        }
    } else if patch.is_object() {
        json_patch::merge(&mut doc, &patch);
    }
});
