//! Label and field selector strings (`labelSelector=`, `fieldSelector=` on list and
//! watch): `LabelSelector::parse` and `FieldSelector::parse` in
//! crates/api/src/selector.rs. The first byte picks which.
//!
//! Property beyond no-crash: a parsed selector's string form parses back to the same
//! selector (the server hands selectors on in that form, e.g. in continue tokens).
#![no_main]

use berth_api::selector::{FieldSelector, LabelSelector};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(s) = std::str::from_utf8(rest) else {
        return;
    };
    if pick % 2 == 0 {
        if let Ok(sel) = LabelSelector::parse(s) {
            let text = sel.to_string();
            let back = LabelSelector::parse(&text)
                .unwrap_or_else(|e| panic!("{text:?} (from {s:?}) does not parse back: {e}"));
            assert_eq!(sel, back, "label selector {s:?} -> {text:?} changed");
        }
    } else if let Ok(sel) = FieldSelector::parse(s) {
        let text = sel.to_string();
        let back = FieldSelector::parse(&text)
            .unwrap_or_else(|e| panic!("{text:?} (from {s:?}) does not parse back: {e}"));
        assert_eq!(sel, back, "field selector {s:?} -> {text:?} changed");
    }
});
