//! `resource.Quantity` strings: `Quantity::parse` in crates/api/src/quantity.rs.
//!
//! Properties beyond no-crash: the canonical string of a parsed quantity parses back to
//! the same value and is its own canonical form; the displayed form (the input when
//! upstream keeps it) parses back to the same value too.
#![no_main]

use berth_api::quantity::Quantity;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(q) = Quantity::parse(s) else {
        return;
    };
    let canonical = q.canonical();
    let back = Quantity::parse(&canonical)
        .unwrap_or_else(|e| panic!("canonical {canonical:?} of {s:?} does not parse: {e}"));
    assert_eq!(
        q.nanos(),
        back.nanos(),
        "{s:?} -> canonical {canonical:?} changed the value"
    );
    assert_eq!(back.canonical(), canonical, "canonical form of {s:?} is not stable");
    let shown = q.to_string();
    let again = Quantity::parse(&shown)
        .unwrap_or_else(|e| panic!("shown {shown:?} of {s:?} does not parse: {e}"));
    assert_eq!(q.nanos(), again.nanos(), "{s:?} -> shown {shown:?} changed the value");
    // Arithmetic the scheduler and quota do on parsed values.
    let mut sum = q.clone();
    sum.add(&back);
    sum.sub(&back);
    let _ = (q.value(), q.milli_value(), q.as_f64());
});
