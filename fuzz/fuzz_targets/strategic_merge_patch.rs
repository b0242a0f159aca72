//! Strategic merge patch (`application/strategic-merge-patch+json`):
//! `berth_api::strategic::apply` on a fixed Pod or Deployment with a fuzzed patch.
//! Input: the first byte picks the document, the rest is the patch as JSON (the
//! apiserver rejects non-object patches before the call, so those are skipped here too).
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
    if !patch.is_object() {
        return;
    }
    let (mut doc, group, kind) = if pick % 2 == 0 {
        (docs::pod(), "", "Pod")
    } else {
        (docs::deployment(), "apps", "Deployment")
    };
    if let Err(e) = berth_api::strategic::apply(&mut doc, &patch, group, "v1", kind) {
        let _ = e.to_string();
    }
});
