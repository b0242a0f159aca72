//! JSON request bodies, decoded as `berth_apiserver::decode::parse` does for
//! `application/json` (and the JSON patch content types): `serde_json` to a `Value`.
//! The apiserver crate itself is not linked (its instrumented build pulls in hyper,
//! rustls and SQLite); this is the same call with the workspace's serde_json features.
//!
//! Property beyond no-crash: a decoded body written back out decodes to the same
//! value, which the server relies on when it stores and serves what it decoded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

#[path = "../src/docs.rs"]
mod docs;

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let text = serde_json::to_vec(&v).expect("a decoded Value serialises");
    let back: Value = serde_json::from_slice(&text).expect("serialised JSON parses back");
    assert!(
        docs::same(&v, &back),
        "JSON round trip changed the value: {v} -> {back}"
    );
});
