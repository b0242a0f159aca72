//! Go's renderings of values, where upstream's messages embed them: `%v` of a
//! `float64`, `encoding/json.Marshal` of a decoded JSON value.

use serde_json::Value;

/// The shortest decimal digits of `f` and the position of the decimal point
/// (Go's `decimalSlice`: `f = 0.d1d2… × 10^dp`). `f` must be finite.
fn shortest_digits(f: f64) -> (bool, String, i32) {
    let s = format!("{:e}", f);
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.as_str()),
    };
    let (mant, exp) = s.split_once('e').unwrap_or((s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    (neg, digits, exp + 1)
}

fn fmt_f(neg: bool, digits: &str, dp: i32) -> String {
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    let n = digits.len() as i32;
    if dp <= 0 {
        out.push_str("0.");
        for _ in 0..(-dp) {
            out.push('0');
        }
        out.push_str(digits);
    } else if dp >= n {
        out.push_str(digits);
        for _ in 0..(dp - n) {
            out.push('0');
        }
    } else {
        let (a, b) = digits.split_at(dp as usize);
        out.push_str(a);
        out.push('.');
        out.push_str(b);
    }
    out
}

fn fmt_e(neg: bool, digits: &str, dp: i32, min_exp_digits: usize) -> String {
    let mut out = String::new();
    if neg {
        out.push('-');
    }
    let (first, rest) = digits.split_at(1.min(digits.len()));
    out.push_str(first);
    if !rest.is_empty() {
        out.push('.');
        out.push_str(rest);
    }
    let exp = dp - 1;
    out.push('e');
    out.push(if exp < 0 { '-' } else { '+' });
    let e = exp.unsigned_abs().to_string();
    for _ in e.len()..min_exp_digits {
        out.push('0');
    }
    out.push_str(&e);
    out
}

/// Go's `fmt.Sprintf("%v", f)` for a `float64`.
pub fn go_float_v(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    let (neg, digits, dp) = shortest_digits(f);
    let exp = dp - 1;
    if !(-4..6).contains(&exp) {
        fmt_e(neg, &digits, dp, 2)
    } else {
        fmt_f(neg, &digits, dp)
    }
}

/// Go's `encoding/json` rendering of a `float64`.
pub fn go_json_float(f: f64) -> String {
    if !f.is_finite() {
        return "null".to_string();
    }
    let abs = f.abs();
    let (neg, digits, dp) = shortest_digits(f);
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        fmt_e(neg, &digits, dp, 1)
    } else {
        fmt_f(neg, &digits, dp)
    }
}

/// Go's `%v` of a JSON number as decoded by apimachinery (int64 or float64).
pub fn go_number_v(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else {
        go_float_v(n.as_f64().unwrap_or(0.0))
    }
}

fn json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_into(v: &Value, out: &mut String, depth: usize) {
    if depth > crate::MAX_DEPTH {
        out.push_str("null");
        return;
    }
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                out.push_str(&i.to_string());
            } else {
                out.push_str(&go_json_float(n.as_f64().unwrap_or(0.0)));
            }
        }
        Value::String(s) => json_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_into(x, out, depth + 1);
            }
            out.push(']');
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_string(k, out);
                out.push(':');
                if let Some(x) = m.get(*k) {
                    json_into(x, out, depth + 1);
                }
            }
            out.push('}');
        }
    }
}

/// Go's `json.Marshal` of an unstructured value: keys sorted, HTML escaped,
/// floats as Go writes them.
pub fn go_json(v: &Value) -> String {
    let mut out = String::new();
    json_into(v, &mut out, 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn float_v_matches_go() {
        // Values checked against Go's fmt.Sprintf("%v", float64(x)).
        let cases = [
            (0.0, "0"),
            (1.0, "1"),
            (1.5, "1.5"),
            (10.0, "10"),
            (123456.0, "123456"),
            (1000000.0, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-2.5, "-2.5"),
            (1e21, "1e+21"),
        ];
        for (f, want) in cases {
            assert_eq!(go_float_v(f), want, "{f}");
        }
    }

    #[test]
    fn json_matches_go() {
        let cases = [
            (json!(1.5), "1.5"),
            (json!(1e21), "1e+21"),
            (json!(1e20), "100000000000000000000"),
            (json!(0.0000001), "1e-7"),
            (
                json!({"b": 1, "a": "<x>"}),
                r#"{"a":"\u003cx\u003e","b":1}"#,
            ),
            (json!([1, null, true]), "[1,null,true]"),
        ];
        for (v, want) in cases {
            assert_eq!(go_json(&v), want);
        }
    }
}
