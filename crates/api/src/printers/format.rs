//! Field access over wire-form objects and the cell formatting helpers the
//! printers share (upstream: the helpers at the bottom of printers.go, plus
//! `labels.FormatLabels`, `metav1.FormatLabelSelector`, `Quantity.String`).
//!
//! Missing or wrong-typed fields read as Go's zero value (0, "", false, empty
//! list), since upstream prints from typed structs where an omitted field is
//! exactly that; "<none>"-style placeholders are the callers' business.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use super::human_duration;

/// The value at `path`, if every step is an object holding the key.
pub(super) fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, key| cur.get(*key))
}

/// A string field; "" when absent or not a string.
pub(super) fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    get(v, path).and_then(Value::as_str).unwrap_or("")
}

/// An optional string field (Go `*string`): `None` when absent or null.
pub(super) fn opt_str<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    get(v, path).and_then(Value::as_str)
}

/// An integer field; 0 when absent or not an integer.
pub(super) fn int_at(v: &Value, path: &[&str]) -> i64 {
    get(v, path).and_then(Value::as_i64).unwrap_or(0)
}

/// An optional integer field (Go `*int32`).
pub(super) fn opt_int(v: &Value, path: &[&str]) -> Option<i64> {
    get(v, path).and_then(Value::as_i64)
}

/// A boolean field; false when absent or not a boolean.
pub(super) fn bool_at(v: &Value, path: &[&str]) -> bool {
    get(v, path).and_then(Value::as_bool).unwrap_or(false)
}

/// An optional boolean field (Go `*bool`).
pub(super) fn opt_bool(v: &Value, path: &[&str]) -> Option<bool> {
    get(v, path).and_then(Value::as_bool)
}

/// An array field; empty when absent or not an array.
pub(super) fn arr<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    get(v, path)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// An object field (Go struct pointer or map): `None` when absent, null or not an object.
pub(super) fn obj<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Map<String, Value>> {
    get(v, path).and_then(Value::as_object)
}

/// Number of entries of a map field (Go `len(map)`).
pub(super) fn map_len(v: &Value, path: &[&str]) -> usize {
    obj(v, path).map_or(0, Map::len)
}

/// `metadata.name`.
pub(super) fn name(v: &Value) -> String {
    str_at(v, &["metadata", "name"]).to_string()
}

/// A timestamp field (metav1.Time or MicroTime); `None` (Go's zero time) when
/// absent, null or unparseable.
pub(super) fn time_at(v: &Value, path: &[&str]) -> Option<DateTime<Utc>> {
    let s = get(v, path)?.as_str()?;
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Upstream `translateTimestampSince`: "<unknown>" for the zero time.
pub(super) fn since(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match t {
        Some(t) => human_duration(now - t),
        None => "<unknown>".to_string(),
    }
}

/// `s` itself, or `placeholder` when empty.
pub(super) fn or(s: &str, placeholder: &str) -> String {
    if s.is_empty() {
        placeholder.to_string()
    } else {
        s.to_string()
    }
}

/// Upstream `labels.FormatLabels`: sorted `k=v` pairs, "<none>" when empty.
pub(super) fn format_labels(m: Option<&Map<String, Value>>) -> String {
    let mut pairs: Vec<String> = m
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
        .collect();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".to_string()
    } else {
        pairs.join(",")
    }
}

/// What `metav1.LabelSelectorAsSelector(sel).String()` gives: `Ok("")` for a
/// nil or empty selector (Nothing / Everything both print as ""), `Err` for
/// an invalid one.
pub(super) fn selector_string(sel: Option<&Value>) -> Result<String, ()> {
    let Some(sel) = sel.filter(|s| !s.is_null()) else {
        return Ok(String::new());
    };
    let sel = sel.as_object().ok_or(())?;
    // (key, rendered requirement); upstream sorts requirements by key.
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(ml) = sel.get("matchLabels").filter(|v| !v.is_null()) {
        for (k, v) in ml.as_object().ok_or(())? {
            let v = v.as_str().ok_or(())?;
            reqs.push((k.clone(), format!("{k}={v}")));
        }
    }
    if let Some(exprs) = sel.get("matchExpressions").filter(|v| !v.is_null()) {
        for e in exprs.as_array().ok_or(())? {
            let key = e.get("key").and_then(Value::as_str).ok_or(())?;
            let op = e.get("operator").and_then(Value::as_str).ok_or(())?;
            let mut values = Vec::new();
            for v in e
                .get("values")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or(&[])
            {
                values.push(v.as_str().ok_or(())?.to_string());
            }
            values.sort();
            values.dedup();
            let rendered = match op {
                "In" | "NotIn" if values.is_empty() => return Err(()),
                "In" => format!("{key} in ({})", values.join(",")),
                "NotIn" => format!("{key} notin ({})", values.join(",")),
                "Exists" | "DoesNotExist" if !values.is_empty() => return Err(()),
                "Exists" => key.to_string(),
                "DoesNotExist" => format!("!{key}"),
                _ => return Err(()),
            };
            reqs.push((key.to_string(), rendered));
        }
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(reqs
        .into_iter()
        .map(|(_, r)| r)
        .collect::<Vec<_>>()
        .join(","))
}

/// Upstream `metav1.FormatLabelSelector`: "<none>" when empty, "<error>" when invalid.
pub(super) fn format_label_selector(sel: Option<&Value>) -> String {
    match selector_string(sel) {
        Ok(s) if s.is_empty() => "<none>".to_string(),
        Ok(s) => s,
        Err(()) => "<error>".to_string(),
    }
}

/// Upstream `layoutContainerCells`: container names and images, comma-joined.
pub(super) fn container_cells(containers: &[Value]) -> (String, String) {
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, &["image"])).collect();
    (names.join(","), images.join(","))
}

/// Upstream `listWithMoreString`: at most `max` items, then "+ N more...".
pub(super) fn list_with_more(list: &[String], count: usize, max: usize) -> String {
    let ret = list.join(",");
    if count > max {
        return format!("{ret} + {} more...", count - max);
    }
    if ret.is_empty() {
        "<unset>".to_string()
    } else {
        ret
    }
}

/// The first `max` of `items`, then "+ N more..." (upstream's endpoint-slice
/// and storage-version lists).
pub(super) fn more_list(items: impl Iterator<Item = String>, max: usize) -> String {
    let mut list = Vec::new();
    let mut count = 0;
    for item in items {
        if list.len() < max {
            list.push(item);
        }
        count += 1;
    }
    list_with_more(&list, count, max)
}

/// An IntOrString as upstream's `String()` prints it.
pub(super) fn int_or_string(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        _ => String::new(),
    }
}

/// Upstream `printBoolPtr`.
pub(super) fn bool_ptr(b: Option<bool>) -> String {
    match b {
        Some(true) => "True".to_string(),
        Some(false) => "False".to_string(),
        None => "<unset>".to_string(),
    }
}

/// A quantity field as `Quantity.String()` prints it: canonical form, "0" when
/// absent (Go's zero Quantity). A string that does not parse is shown as is.
pub(super) fn quantity_at(v: &Value, path: &[&str]) -> String {
    match get(v, path) {
        Some(Value::String(s)) => canonical_quantity(s).unwrap_or_else(|| s.clone()),
        Some(Value::Number(n)) => {
            canonical_quantity(&n.to_string()).unwrap_or_else(|| n.to_string())
        }
        _ => "0".to_string(),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum QuantityFormat {
    DecimalSI,
    BinarySI,
    DecimalExponent,
}

const NANO: i128 = 1_000_000_000;

/// The canonical form of a resource quantity (upstream `Quantity.String()`):
/// values are held in nano units, rounded up below that, as upstream does.
/// `None` when it does not parse or is too large for this representation.
pub(super) fn canonical_quantity(s: &str) -> Option<String> {
    let s = s.trim();
    let (negative, rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let num_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(num_end);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if (int_part.is_empty() && frac_part.is_empty()) || frac_part.contains('.') {
        return None;
    }
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    // Beyond this many significant digits i128 nano arithmetic could overflow.
    if digits.len() > 30 {
        return None;
    }
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let frac = i32::try_from(frac_part.len()).ok()?;

    let (format, pow2, pow10) = match suffix {
        "" => (QuantityFormat::DecimalSI, 0, 0),
        "Ki" => (QuantityFormat::BinarySI, 10, 0),
        "Mi" => (QuantityFormat::BinarySI, 20, 0),
        "Gi" => (QuantityFormat::BinarySI, 30, 0),
        "Ti" => (QuantityFormat::BinarySI, 40, 0),
        "Pi" => (QuantityFormat::BinarySI, 50, 0),
        "Ei" => (QuantityFormat::BinarySI, 60, 0),
        "n" => (QuantityFormat::DecimalSI, 0, -9),
        "u" => (QuantityFormat::DecimalSI, 0, -6),
        "m" => (QuantityFormat::DecimalSI, 0, -3),
        "k" => (QuantityFormat::DecimalSI, 0, 3),
        "M" => (QuantityFormat::DecimalSI, 0, 6),
        "G" => (QuantityFormat::DecimalSI, 0, 9),
        "T" => (QuantityFormat::DecimalSI, 0, 12),
        "P" => (QuantityFormat::DecimalSI, 0, 15),
        "E" => (QuantityFormat::DecimalSI, 0, 18),
        _ => {
            let exp = suffix.strip_prefix(['e', 'E'])?;
            let e: i32 = exp.parse().ok()?;
            // Beyond this the value cannot be held in nano units anyway.
            if e.abs() > 60 {
                return None;
            }
            (QuantityFormat::DecimalExponent, 0, e)
        }
    };

    // nanos = mantissa * 2^pow2 * 10^(9 + pow10 - frac), rounded up.
    let mut value = mantissa.checked_mul(1i128.checked_shl(pow2)?)?;
    let scale = (9 + pow10).checked_sub(frac)?;
    if scale >= 0 {
        value = value.checked_mul(10i128.checked_pow(scale as u32)?)?;
    } else {
        let div = 10i128.checked_pow(scale.unsigned_abs())?;
        value = value.checked_add(div - 1)? / div;
    }
    if negative {
        value = -value;
    }
    Some(format_quantity(value, format))
}

fn format_quantity(nanos: i128, mut format: QuantityFormat) -> String {
    if nanos == 0 {
        return "0".to_string();
    }
    // Small or fractional binary quantities print as decimal, as upstream.
    if format == QuantityFormat::BinarySI && (nanos.abs() < 1024 * NANO || nanos % NANO != 0) {
        format = QuantityFormat::DecimalSI;
    }
    if format == QuantityFormat::BinarySI {
        let mut v = nanos / NANO;
        let mut i = 0;
        while i < 6 && v % 1024 == 0 {
            v /= 1024;
            i += 1;
        }
        return format!("{v}{}", ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"][i]);
    }
    // Strip trailing zeros into the exponent, then back off to a multiple of 3.
    let (mut m, mut e) = (nanos, -9i32);
    while m % 10 == 0 {
        m /= 10;
        e += 1;
    }
    let mut e3 = e.div_euclid(3) * 3;
    if format == QuantityFormat::DecimalSI && e3 > 18 {
        e3 = 18;
    }
    let m = m * 10i128.pow((e - e3) as u32);
    let suffix = match format {
        QuantityFormat::DecimalExponent if e3 == 0 => String::new(),
        QuantityFormat::DecimalExponent => format!("e{e3}"),
        _ => match e3 {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            18 => "E",
            _ => "",
        }
        .to_string(),
    };
    format!("{m}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_canonicalize_like_upstream() {
        let cases = [
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("512", "512"),
            ("1000m", "1"),
            ("1.5", "1500m"),
            ("500m", "500m"),
            ("2000", "2k"),
            ("1500", "1500"),
            ("100k", "100k"),
            ("0", "0"),
            ("0Gi", "0"),
            ("1e3", "1e3"),
            ("1.5e3", "1500"),
            ("-1Gi", "-1Gi"),
            ("1Ki", "1Ki"),
            ("1000Ki", "1000Ki"),
            ("100Mi", "100Mi"),
            ("0.1", "100m"),
            ("1n", "1n"),
            ("0.1n", "1n"),
            ("10G", "10G"),
            ("8Gi", "8Gi"),
            ("1Ei", "1Ei"),
            ("1E", "1E"),
            ("1000E", "1000E"),
        ];
        for (input, want) in cases {
            assert_eq!(canonical_quantity(input).as_deref(), Some(want), "{input}");
        }
        let huge = format!("1{}", "0".repeat(40));
        let tiny = format!("0.{}1", "0".repeat(100));
        for bad in [
            "",
            "abc",
            "1.2.3",
            "1Xi",
            ".",
            "1e2147483647",
            "1e-99",
            "99999999999999999999Ei",
            &huge,
            &tiny,
        ] {
            assert_eq!(canonical_quantity(bad), None, "{bad}");
        }
    }

    #[test]
    fn label_selectors_format_like_upstream() {
        let cases = [
            (json!(null), "<none>"),
            (json!({}), "<none>"),
            (json!({"matchLabels": {"b": "2", "a": "1"}}), "a=1,b=2"),
            (
                json!({"matchLabels": {"app": "web"}, "matchExpressions": [
                    {"key": "tier", "operator": "In", "values": ["fe", "be"]},
                    {"key": "env", "operator": "NotIn", "values": ["dev"]},
                    {"key": "x", "operator": "Exists"},
                    {"key": "gone", "operator": "DoesNotExist"}
                ]}),
                "app=web,env notin (dev),!gone,tier in (be,fe),x",
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
                "<error>",
            ),
            (
                json!({"matchExpressions": [{"key": "a", "operator": "Bogus"}]}),
                "<error>",
            ),
            (json!("nope"), "<error>"),
        ];
        for (sel, want) in cases {
            assert_eq!(format_label_selector(Some(&sel)), want, "{sel}");
        }
        assert_eq!(format_label_selector(None), "<none>");
    }

    #[test]
    fn labels_sorted_or_none() {
        let m = json!({"z": "1", "a": "2"});
        assert_eq!(format_labels(m.as_object()), "a=2,z=1");
        assert_eq!(format_labels(None), "<none>");
    }
}
