//! YAML request bodies (`application/yaml`, `application/apply-patch+yaml`), decoded as
//! `berth_apiserver::decode::parse` does: UTF-8 check, JSON first, then
//! `serde_saphyr::from_str::<Value>` with the workspace's serde-saphyr (2.x). The
//! apiserver crate is not linked (see json_body.rs for why).
//!
//! Property beyond no-crash: what YAML decodes to is a JSON value that serialises and
//! parses back unchanged (the server stores it as JSON).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

#[path = "../src/docs.rs"]
mod docs;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let v = match serde_json::from_str::<Value>(text) {
        Ok(v) => v,
        Err(_) => match serde_saphyr::from_str::<Value>(text) {
            Ok(v) => v,
            Err(e) => {
                // The error becomes the 400's message: formatting it must not panic.
                let _ = e.to_string();
                return;
            }
        },
    };
    let json = serde_json::to_vec(&v).expect("a decoded Value serialises");
    let back: Value = serde_json::from_slice(&json).expect("serialised JSON parses back");
    assert!(
        docs::same(&v, &back),
        "YAML-decoded value changed through JSON: {v} -> {back}"
    );
});
