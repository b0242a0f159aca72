//! `resource.Quantity` strings: `Quantity::parse` in crates/api/src/quantity.rs.
//!
//! Properties beyond no-crash: the canonical string of a parsed quantity parses back to
//! the same value, and is its own canonical form from the second step; the displayed
//! form (the input when upstream keeps it) parses back to the same value too.
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
    // The canonical form is stable from its second step: a binary-SI value that is no
    // multiple of 1024 prints as a plain integer ("9281223010312.5Ki" ->
    // "9503972362560000"), which reads back as decimal-SI ("9503972362560k"), as
    // upstream's CanonicalizeBytes does.
    let second = back.canonical();
    let third = Quantity::parse(&second)
        .unwrap_or_else(|e| panic!("canonical {second:?} of {s:?} does not parse: {e}"))
        .canonical();
    assert_eq!(second, third, "canonical form of {s:?} is not stable");
    let shown = q.to_string();
    let again = Quantity::parse(&shown)
        .unwrap_or_else(|e| panic!("shown {shown:?} of {s:?} does not parse: {e}"));
    assert_eq!(
        q.nanos(),
        again.nanos(),
        "{s:?} -> shown {shown:?} changed the value"
    );
    // Arithmetic the scheduler and quota do on parsed values.
    let mut sum = q.clone();
    sum.add(&back);
    sum.sub(&back);
    let _ = (q.value(), q.milli_value(), q.as_f64());
});
