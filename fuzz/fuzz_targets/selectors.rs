//! Label and field selector strings (`labelSelector=`, `fieldSelector=` on list and
//! watch): `LabelSelector::parse` and `FieldSelector::parse` in
//! crates/api/src/selector.rs. The first byte picks which.
//!
//! Property beyond no-crash: a parsed selector's string form parses back to the same
//! selector (the server hands selectors on in that form, e.g. in continue tokens);
//! for field selectors, the same terms.
#![no_main]

use berth_api::selector::{FieldSelector, FieldTerm, LabelSelector};
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
        // Terms are ordered by their raw text before unescaping (as upstream's
        // ParseSelector sorts its parts), so the order may differ; the terms may not.
        let mut a = sel.terms().to_vec();
        let mut b = back.terms().to_vec();
        let key = |t: &FieldTerm| (t.field.clone(), t.value.clone(), t.negated);
        a.sort_by_key(key);
        b.sort_by_key(key);
        assert_eq!(a, b, "field selector {s:?} -> {text:?} changed");
    }
});
