//! `application/vnd.kubernetes.protobuf` bodies: `berth_api::protobuf::decode`, the
//! call `berth_apiserver::decode::parse` makes.
//!
//! Property beyond no-crash: an object that decodes encodes again (the server answers
//! protobuf clients with `encode` of what it stored).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match berth_api::protobuf::decode(data) {
        Ok(v) => {
            let _ = berth_api::protobuf::encode(&v);
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
