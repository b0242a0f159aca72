//! Server-side apply: `berth_api::ssa::apply` with a fuzzed applied object (JSON),
//! over a live Pod or Deployment that another manager applied first, or with no live
//! object (apply creates it). Input: the first byte picks the document (bit 0), whether
//! a live object exists (bit 1), `force` (bit 2) and the manager (bit 3: `kubectl`,
//! which takes the last-applied path). `apiVersion` is set to the request's when the
//! applied object is an object, so that inputs get past the version check to the merge.
//!
//! Property beyond no-crash: a successful apply's result applies again (same manager,
//! same object) without error; that is what a second `kubectl apply` does.
#![no_main]

use berth_api::ssa::{self, Request};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

#[path = "../src/docs.rs"]
mod docs;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(mut applied) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    let (doc, api_version) = if pick & 1 == 0 {
        (docs::pod(), "v1")
    } else {
        (docs::deployment(), "apps/v1")
    };
    if let Value::Object(m) = &mut applied {
        m.insert("apiVersion".into(), Value::String(api_version.into()));
    }
    let ignored = ssa::reset_fields(true, None);
    let now = "2026-01-01T00:00:00Z";
    let base = Request {
        manager: "creator",
        api_version,
        now,
        subresource: None,
        ignored: &ignored,
    };
    let live = if pick & 2 != 0 {
        Some(ssa::apply(None, &doc, &base, false).expect("the fixed document applies"))
    } else {
        None
    };
    let req = Request {
        manager: if pick & 8 != 0 { "kubectl" } else { "fuzz" },
        ..base
    };
    let force = pick & 4 != 0;
    match ssa::apply(live.as_ref(), &applied, &req, force) {
        Ok(obj) => {
            if let Err(e) = ssa::apply(Some(&obj), &applied, &req, false) {
                panic!("re-applying the same object by the same manager failed: {e}");
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
