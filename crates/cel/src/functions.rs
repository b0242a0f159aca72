//! The CEL standard library (operators, conversions, strings, timestamps and
//! durations) and the dispatch to the Kubernetes libraries.
//!
//! Every function takes its already evaluated receiver and arguments; the
//! short-circuiting operators (`&&`, `||`, `?:`) are in the interpreter.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use chrono::{DateTime, Datelike, FixedOffset, TimeZone, Timelike};

use crate::EvalError;
use crate::library;
use crate::value::{EvalValue, Key, ListType, ListValue, equals, map_keys_match, numeric_cmp};

pub(crate) type CallResult = Result<EvalValue, EvalError>;

/// What a call sees besides its arguments: the regex cache.
#[derive(Default)]
pub(crate) struct CallContext {
    regexes: BTreeMap<String, Arc<regex::Regex>>,
}

/// Patterns compiled by any evaluation, shared by later ones: rules' patterns
/// are nearly always constants (upstream compiles those with the program).
/// Bounded, since patterns built from object data are user input too.
static COMPILED: std::sync::Mutex<Option<HashMap<String, Arc<regex::Regex>>>> =
    std::sync::Mutex::new(None);
const COMPILED_MAX: usize = 1024;

impl CallContext {
    /// Compiles a RE2-syntax pattern (once for the process while the shared
    /// cache has room), bounded in size because patterns are user input.
    pub(crate) fn regex(&mut self, pattern: &str) -> Result<Arc<regex::Regex>, EvalError> {
        if let Some(r) = self.regexes.get(pattern) {
            return Ok(r.clone());
        }
        let shared = COMPILED
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(HashMap::new)
            .get(pattern)
            .cloned();
        let r = match shared {
            Some(r) => r,
            None => {
                let r = Arc::new(
                    regex::RegexBuilder::new(pattern)
                        .size_limit(1 << 22)
                        .dfa_size_limit(1 << 22)
                        .build()
                        .map_err(|e| EvalError::Other(format!("invalid regex: {e}")))?,
                );
                let mut guard = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
                let cache = guard.get_or_insert_with(HashMap::new);
                if cache.len() < COMPILED_MAX {
                    cache.insert(pattern.to_string(), r.clone());
                }
                r
            }
        };
        if self.regexes.len() < 64 {
            self.regexes.insert(pattern.to_string(), r.clone());
        }
        Ok(r)
    }
}

pub(crate) fn no_overload() -> EvalError {
    EvalError::NoSuchOverload
}

/// Calls `name`: `target` is the receiver of a member call.
pub(crate) fn call(
    name: &str,
    target: Option<&EvalValue>,
    args: &[EvalValue],
    cx: &mut CallContext,
) -> CallResult {
    if let Some(r) = stdlib(name, target, args, cx) {
        return r;
    }
    if let Some(r) = library::call(name, target, args, cx) {
        return r;
    }
    Err(no_overload())
}

fn stdlib(
    name: &str,
    target: Option<&EvalValue>,
    args: &[EvalValue],
    cx: &mut CallContext,
) -> Option<CallResult> {
    use EvalValue as V;
    let r = match (name, target, args) {
        ("_+_", None, [a, b]) => add(a, b),
        ("_-_", None, [a, b]) => sub(a, b),
        ("_*_", None, [a, b]) => mul(a, b),
        ("_/_", None, [a, b]) => div(a, b),
        ("_%_", None, [a, b]) => rem(a, b),
        ("-_", None, [a]) => neg(a),
        ("!_", None, [V::Bool(b)]) => Ok(V::Bool(!b)),
        ("_==_", None, [a, b]) => Ok(V::Bool(equals(a, b))),
        ("_!=_", None, [a, b]) => Ok(V::Bool(!equals(a, b))),
        ("_<_", None, [a, b]) => compare(a, b).map(|o| V::Bool(o == Ordering::Less)),
        ("_<=_", None, [a, b]) => compare(a, b).map(|o| V::Bool(o != Ordering::Greater)),
        ("_>_", None, [a, b]) => compare(a, b).map(|o| V::Bool(o == Ordering::Greater)),
        ("_>=_", None, [a, b]) => compare(a, b).map(|o| V::Bool(o != Ordering::Less)),
        ("@in", None, [a, b]) => contains_elem(b, a),
        ("_[_]", None, [a, b]) => index(a, b),
        ("size", None, [a]) | ("size", Some(a), []) => size(a),
        ("contains", Some(V::String(s)), [V::String(x)]) => Ok(V::Bool(s.contains(&**x))),
        ("startsWith", Some(V::String(s)), [V::String(x)]) => Ok(V::Bool(s.starts_with(&**x))),
        ("endsWith", Some(V::String(s)), [V::String(x)]) => Ok(V::Bool(s.ends_with(&**x))),
        ("matches", Some(V::String(s)), [V::String(re)])
        | ("matches", None, [V::String(s), V::String(re)]) => {
            cx.regex(re).map(|r| V::Bool(r.is_match(s)))
        }
        ("int", None, [a]) => to_int(a),
        ("uint", None, [a]) => to_uint(a),
        ("double", None, [a]) => to_double(a),
        ("string", None, [a]) => to_string(a),
        ("bytes", None, [V::String(s)]) => Ok(V::Bytes(s.as_bytes().into())),
        ("bytes", None, [b @ V::Bytes(_)]) => Ok(b.clone()),
        ("bool", None, [V::Bool(b)]) => Ok(V::Bool(*b)),
        ("bool", None, [V::String(s)]) => match &**s {
            "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(V::Bool(true)),
            "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(V::Bool(false)),
            _ => Err(EvalError::Other(
                "type conversion error from 'string' to 'bool'".into(),
            )),
        },
        ("dyn", None, [a]) => Ok(a.clone()),
        ("type", None, [a]) => Ok(V::Type(Arc::from(a.type_name()))),
        ("duration", None, [V::String(s)]) => parse_go_duration(s)
            .map(V::Duration)
            .ok_or_else(|| EvalError::Other(format!("time: invalid duration \"{s}\""))),
        ("duration", None, [d @ V::Duration(_)]) => Ok(d.clone()),
        ("timestamp", None, [V::String(s)]) => {
            parse_timestamp(s).map(V::Timestamp).ok_or_else(|| {
                EvalError::Other(format!(
                    "parsing time \"{s}\" as \"2006-01-02T15:04:05Z07:00\": cannot parse"
                ))
            })
        }
        ("timestamp", None, [t @ V::Timestamp(_)]) => Ok(t.clone()),
        ("timestamp", None, [V::Int(secs)]) => DateTime::from_timestamp(*secs, 0)
            .map(|t| V::Timestamp(t.fixed_offset()))
            .ok_or_else(|| EvalError::Other("timestamp out of range".into())),
        (
            "getFullYear" | "getMonth" | "getDayOfMonth" | "getDate" | "getDayOfWeek"
            | "getDayOfYear" | "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds",
            Some(V::Timestamp(t)),
            [] | [V::String(_)],
        ) => timestamp_part(name, t, args.first().and_then(V::as_str)),
        (
            "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds",
            Some(V::Duration(d)),
            [],
        ) => Ok(V::Int(match name {
            "getHours" => d / 3_600_000_000_000,
            "getMinutes" => d / 60_000_000_000,
            "getSeconds" => d / 1_000_000_000,
            _ => d / 1_000_000,
        })),
        // Optional values (cel-go's optional library).
        ("optional.of", None, [a]) => Ok(V::Optional(Some(Box::new(a.clone())))),
        ("optional.ofNonZeroValue", None, [a]) => Ok(V::Optional(
            (!is_zero_value(a)).then(|| Box::new(a.clone())),
        )),
        ("optional.none", None, []) => Ok(V::Optional(None)),
        ("hasValue", Some(V::Optional(o)), []) => Ok(V::Bool(o.is_some())),
        ("value", Some(V::Optional(o)), []) => match o {
            Some(v) => Ok((**v).clone()),
            None => Err(EvalError::Other("optional.none() dereference".into())),
        },
        ("orValue", Some(V::Optional(o)), [d]) => Ok(match o {
            Some(v) => (**v).clone(),
            None => d.clone(),
        }),
        ("or", Some(V::Optional(o)), [other @ V::Optional(_)]) => Ok(match o {
            Some(_) => V::Optional(o.clone()),
            None => other.clone(),
        }),
        ("_[?_]", None, [a, b]) => Ok(V::Optional(match index(a, b) {
            Ok(v) => Some(Box::new(v)),
            Err(_) => None,
        })),
        _ => return None,
    };
    Some(r)
}

fn overflow() -> EvalError {
    EvalError::Other("integer overflow".into())
}

fn add(a: &EvalValue, b: &EvalValue) -> CallResult {
    use EvalValue as V;
    Ok(match (a, b) {
        (V::Int(x), V::Int(y)) => V::Int(x.checked_add(*y).ok_or_else(overflow)?),
        (V::Uint(x), V::Uint(y)) => V::Uint(x.checked_add(*y).ok_or_else(overflow)?),
        (V::Double(x), V::Double(y)) => V::Double(x + y),
        (V::String(x), V::String(y)) => {
            let mut s = String::with_capacity(x.len() + y.len());
            s.push_str(x);
            s.push_str(y);
            V::from(s)
        }
        (V::Bytes(x), V::Bytes(y)) => V::Bytes([&x[..], &y[..]].concat().into()),
        (V::List(x), V::List(y)) => V::List(Arc::new(concat_lists(x, y))),
        (V::Duration(x), V::Duration(y)) => V::Duration(x.checked_add(*y).ok_or_else(overflow)?),
        (V::Timestamp(t), V::Duration(d)) | (V::Duration(d), V::Timestamp(t)) => {
            V::Timestamp(add_duration(t, *d)?)
        }
        _ => return Err(no_overload()),
    })
}

/// List concatenation; for `list-type: set` a union and for `list-type: map`
/// a merge where the right side's element replaces the left's with the same
/// keys, as upstream's unstructured lists.
pub(crate) fn concat_lists(x: &ListValue, y: &ListValue) -> ListValue {
    let list_type = if x.list_type != ListType::Atomic {
        x.list_type.clone()
    } else {
        y.list_type.clone()
    };
    let mut items = x.items.clone();
    match &list_type {
        ListType::Atomic => items.extend(y.items.iter().cloned()),
        ListType::Set => {
            for e in &y.items {
                if !items.iter().any(|i| equals(i, e)) {
                    items.push(e.clone());
                }
            }
        }
        ListType::Map(keys) => {
            for e in &y.items {
                match items.iter().position(|i| map_keys_match(i, e, keys)) {
                    Some(p) => items[p] = e.clone(),
                    None => items.push(e.clone()),
                }
            }
        }
    }
    ListValue { items, list_type }
}

fn add_duration(t: &DateTime<FixedOffset>, d: i64) -> Result<DateTime<FixedOffset>, EvalError> {
    t.checked_add_signed(chrono::TimeDelta::nanoseconds(d))
        .filter(|t| (1..=9999).contains(&t.year()))
        .ok_or_else(|| EvalError::Other("timestamp overflow".into()))
}

fn sub(a: &EvalValue, b: &EvalValue) -> CallResult {
    use EvalValue as V;
    Ok(match (a, b) {
        (V::Int(x), V::Int(y)) => V::Int(x.checked_sub(*y).ok_or_else(overflow)?),
        (V::Uint(x), V::Uint(y)) => V::Uint(x.checked_sub(*y).ok_or_else(overflow)?),
        (V::Double(x), V::Double(y)) => V::Double(x - y),
        (V::Duration(x), V::Duration(y)) => V::Duration(x.checked_sub(*y).ok_or_else(overflow)?),
        (V::Timestamp(t), V::Duration(d)) => {
            V::Timestamp(add_duration(t, d.checked_neg().ok_or_else(overflow)?)?)
        }
        (V::Timestamp(x), V::Timestamp(y)) => V::Duration(
            x.signed_duration_since(*y)
                .num_nanoseconds()
                .ok_or_else(overflow)?,
        ),
        _ => return Err(no_overload()),
    })
}

fn mul(a: &EvalValue, b: &EvalValue) -> CallResult {
    use EvalValue as V;
    Ok(match (a, b) {
        (V::Int(x), V::Int(y)) => V::Int(x.checked_mul(*y).ok_or_else(overflow)?),
        (V::Uint(x), V::Uint(y)) => V::Uint(x.checked_mul(*y).ok_or_else(overflow)?),
        (V::Double(x), V::Double(y)) => V::Double(x * y),
        _ => return Err(no_overload()),
    })
}

fn div(a: &EvalValue, b: &EvalValue) -> CallResult {
    use EvalValue as V;
    let zero = || EvalError::Other("division by zero".into());
    Ok(match (a, b) {
        (V::Int(_), V::Int(0)) | (V::Uint(_), V::Uint(0)) => return Err(zero()),
        (V::Int(x), V::Int(y)) => V::Int(x.checked_div(*y).ok_or_else(overflow)?),
        (V::Uint(x), V::Uint(y)) => V::Uint(x / y),
        (V::Double(x), V::Double(y)) => V::Double(x / y),
        _ => return Err(no_overload()),
    })
}

fn rem(a: &EvalValue, b: &EvalValue) -> CallResult {
    use EvalValue as V;
    let zero = || EvalError::Other("modulus by zero".into());
    Ok(match (a, b) {
        (V::Int(_), V::Int(0)) | (V::Uint(_), V::Uint(0)) => return Err(zero()),
        (V::Int(x), V::Int(y)) => V::Int(x.checked_rem(*y).ok_or_else(overflow)?),
        (V::Uint(x), V::Uint(y)) => V::Uint(x % y),
        _ => return Err(no_overload()),
    })
}

fn neg(a: &EvalValue) -> CallResult {
    use EvalValue as V;
    Ok(match a {
        V::Int(x) => V::Int(x.checked_neg().ok_or_else(overflow)?),
        V::Double(x) => V::Double(-x),
        V::Duration(x) => V::Duration(x.checked_neg().ok_or_else(overflow)?),
        _ => return Err(no_overload()),
    })
}

pub(crate) fn compare(a: &EvalValue, b: &EvalValue) -> Result<Ordering, EvalError> {
    use EvalValue as V;
    let o = match (a, b) {
        (V::Int(_) | V::Uint(_) | V::Double(_), V::Int(_) | V::Uint(_) | V::Double(_)) => {
            // NaN compares false both ways; no ordering means "not less".
            return Ok(numeric_cmp(a, b).unwrap_or(Ordering::Equal));
        }
        (V::String(x), V::String(y)) => x.cmp(y),
        (V::Bytes(x), V::Bytes(y)) => x.cmp(y),
        (V::Bool(x), V::Bool(y)) => x.cmp(y),
        (V::Duration(x), V::Duration(y)) => x.cmp(y),
        (V::Timestamp(x), V::Timestamp(y)) => x.cmp(y),
        _ => return Err(no_overload()),
    };
    Ok(o)
}

fn contains_elem(container: &EvalValue, elem: &EvalValue) -> CallResult {
    match container {
        EvalValue::List(l) => Ok(EvalValue::Bool(l.items.iter().any(|i| equals(i, elem)))),
        EvalValue::Map(m) => Ok(EvalValue::Bool(m.get(elem).is_some())),
        _ => Err(no_overload()),
    }
}

pub(crate) fn index(container: &EvalValue, key: &EvalValue) -> CallResult {
    use EvalValue as V;
    match container {
        V::List(l) => {
            let i = match key {
                V::Int(i) => *i,
                V::Uint(u) => i64::try_from(*u).unwrap_or(i64::MAX),
                V::Double(d) if d.fract() == 0.0 => *d as i64,
                _ => return Err(no_overload()),
            };
            usize::try_from(i)
                .ok()
                .and_then(|i| l.items.get(i))
                .cloned()
                .ok_or_else(|| EvalError::Other(format!("index out of bounds: {i}")))
        }
        V::Map(m) => {
            if Key::from_value(key).is_none() && !matches!(key, V::Double(_)) {
                return Err(no_overload());
            }
            m.get(key)
                .cloned()
                .ok_or_else(|| EvalError::NoSuchKey(key.to_string()))
        }
        _ => Err(no_overload()),
    }
}

fn size(a: &EvalValue) -> CallResult {
    use EvalValue as V;
    Ok(V::Int(match a {
        V::String(s) => s.chars().count() as i64,
        V::Bytes(b) => b.len() as i64,
        V::List(l) => l.items.len() as i64,
        V::Map(m) => m.entries.len() as i64,
        _ => return Err(no_overload()),
    }))
}

fn conversion_error(from: &EvalValue, to: &str) -> EvalError {
    EvalError::Other(format!(
        "type conversion error from '{}' to '{to}'",
        from.type_name()
    ))
}

fn range_error(from: &EvalValue, to: &str) -> EvalError {
    EvalError::Other(format!("{} out of range for {to}", from.type_name()))
}

fn to_int(a: &EvalValue) -> CallResult {
    use EvalValue as V;
    Ok(V::Int(match a {
        V::Int(i) => *i,
        V::Uint(u) => i64::try_from(*u).map_err(|_| range_error(a, "int"))?,
        V::Double(d) => {
            if !d.is_finite() || *d <= -9.223_372_036_854_776e18 || *d >= 9.223_372_036_854_776e18 {
                return Err(range_error(a, "int"));
            }
            d.trunc() as i64
        }
        V::String(s) => s.parse::<i64>().map_err(|_| conversion_error(a, "int"))?,
        V::Timestamp(t) => t.timestamp(),
        V::Duration(d) => *d,
        _ => return Err(no_overload()),
    }))
}

fn to_uint(a: &EvalValue) -> CallResult {
    use EvalValue as V;
    Ok(V::Uint(match a {
        V::Uint(u) => *u,
        V::Int(i) => u64::try_from(*i).map_err(|_| range_error(a, "uint"))?,
        V::Double(d) => {
            if !d.is_finite() || *d < 0.0 || *d >= 1.844_674_407_370_955_2e19 {
                return Err(range_error(a, "uint"));
            }
            d.trunc() as u64
        }
        V::String(s) => s.parse::<u64>().map_err(|_| conversion_error(a, "uint"))?,
        _ => return Err(no_overload()),
    }))
}

fn to_double(a: &EvalValue) -> CallResult {
    use EvalValue as V;
    Ok(V::Double(match a {
        V::Double(d) => *d,
        V::Int(i) => *i as f64,
        V::Uint(u) => *u as f64,
        V::String(s) => s
            .parse::<f64>()
            .map_err(|_| conversion_error(a, "double"))?,
        _ => return Err(no_overload()),
    }))
}

fn to_string(a: &EvalValue) -> CallResult {
    use EvalValue as V;
    Ok(match a {
        V::String(_) => a.clone(),
        V::Int(i) => V::from(i.to_string()),
        V::Uint(u) => V::from(u.to_string()),
        V::Double(d) => V::from(format_double(*d)),
        V::Bool(b) => V::from(b.to_string()),
        V::Bytes(b) => {
            V::from(String::from_utf8(b.to_vec()).map_err(|_| conversion_error(a, "string"))?)
        }
        V::Timestamp(t) => V::from(format_timestamp(t)),
        V::Duration(d) => V::from(format_duration(*d)),
        V::Type(t) => V::String(t.clone()),
        V::Quantity(q) => V::from(q.canonical()),
        V::Url(u) => V::from(u.raw.clone()),
        V::Ip(ip) => V::from(ip.to_string()),
        V::Cidr(c) => V::from(c.to_string()),
        _ => return Err(no_overload()),
    })
}

/// Go's `strconv.FormatFloat(d, 'g', -1, 64)` for common magnitudes.
fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let abs = d.abs();
    if abs != 0.0 && !(1e-4..1e21).contains(&abs) {
        let s = format!("{d:e}");
        // Rust writes `1e21`, Go `1e+21`.
        match s.split_once('e') {
            Some((m, e)) if !e.starts_with('-') => format!("{m}e+{e:0>2}"),
            Some((m, e)) => format!("{m}e-{:0>2}", &e[1..]),
            None => s,
        }
    } else {
        format!("{d}")
    }
}

/// CEL's duration string: seconds with the fraction Go would print (`90s`,
/// `1.5s`).
pub(crate) fn format_duration(nanos: i64) -> String {
    let secs = nanos / 1_000_000_000;
    let frac = (nanos % 1_000_000_000).unsigned_abs();
    if frac == 0 {
        return format!("{secs}s");
    }
    let sign = if nanos < 0 && secs == 0 { "-" } else { "" };
    let frac = format!("{frac:09}");
    format!("{sign}{secs}.{}s", frac.trim_end_matches('0'))
}

/// Go's `time.ParseDuration` (`1h30m`, `1.5s`, `-300ms`).
pub(crate) fn parse_go_duration(s: &str) -> Option<i64> {
    let (neg, mut rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_end);
        if num.is_empty() || num == "." {
            return None;
        }
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_end);
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
        let int: i128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().ok()?
        };
        let mut v = int.checked_mul(scale)?;
        if !frac_part.is_empty() {
            let digits = &frac_part[..frac_part.len().min(18)];
            let f: i128 = digits.parse().ok()?;
            let div = 10i128.pow(digits.len() as u32);
            v = v.checked_add(f * scale / div)?;
        }
        total = total.checked_add(v)?;
        if total > i128::from(i64::MAX) + 1 {
            return None;
        }
        rest = tail;
    }
    let total = if neg { -total } else { total };
    i64::try_from(total).ok()
}

/// RFC 3339 timestamps, in CEL's range (years 1 to 9999).
pub(crate) fn parse_timestamp(s: &str) -> Option<DateTime<FixedOffset>> {
    let t = DateTime::parse_from_rfc3339(s).ok()?;
    (1..=9999).contains(&t.naive_utc().year()).then_some(t)
}

/// Go's `time.RFC3339Nano`: fraction without trailing zeros, `Z` for UTC.
pub(crate) fn format_timestamp(t: &DateTime<FixedOffset>) -> String {
    let base = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = t.timestamp_subsec_nanos();
    let frac = if nanos == 0 {
        String::new()
    } else {
        format!(".{nanos:09}").trim_end_matches('0').to_string()
    };
    let off = t.offset().local_minus_utc();
    let zone = if off == 0 {
        "Z".to_string()
    } else {
        let sign = if off < 0 { '-' } else { '+' };
        let a = off.unsigned_abs();
        format!("{sign}{:02}:{:02}", a / 3600, (a % 3600) / 60)
    };
    format!("{base}{frac}{zone}")
}

fn tz_offset(tz: &str) -> Result<FixedOffset, EvalError> {
    if tz == "UTC" || tz.is_empty() {
        return FixedOffset::east_opt(0).ok_or_else(|| EvalError::Other("bad offset".into()));
    }
    // Fixed offsets (`+05:30`, `-08:00`); IANA names need a tz database that
    // this crate does not carry.
    let (sign, rest) = match tz.as_bytes().first() {
        Some(b'+') => (1, &tz[1..]),
        Some(b'-') => (-1, &tz[1..]),
        Some(c) if c.is_ascii_digit() => (1, tz),
        _ => return Err(EvalError::Other(format!("unknown time zone {tz}"))),
    };
    let (h, m) = rest.split_once(':').unwrap_or((rest, "0"));
    let (Ok(h), Ok(m)) = (h.parse::<i32>(), m.parse::<i32>()) else {
        return Err(EvalError::Other(format!("unknown time zone {tz}")));
    };
    FixedOffset::east_opt(sign * (h * 3600 + m * 60))
        .ok_or_else(|| EvalError::Other(format!("unknown time zone {tz}")))
}

fn timestamp_part(name: &str, t: &DateTime<FixedOffset>, tz: Option<&str>) -> CallResult {
    let off = tz_offset(tz.unwrap_or("UTC"))?;
    let t = off.from_utc_datetime(&t.naive_utc());
    let v = match name {
        "getFullYear" => i64::from(t.year()),
        "getMonth" => i64::from(t.month0()),
        "getDayOfMonth" => i64::from(t.day0()),
        "getDate" => i64::from(t.day()),
        "getDayOfWeek" => i64::from(t.weekday().num_days_from_sunday()),
        "getDayOfYear" => i64::from(t.ordinal0()),
        "getHours" => i64::from(t.hour()),
        "getMinutes" => i64::from(t.minute()),
        "getSeconds" => i64::from(t.second()),
        _ => i64::from(t.timestamp_subsec_millis()),
    };
    Ok(EvalValue::Int(v))
}

fn is_zero_value(v: &EvalValue) -> bool {
    use EvalValue as V;
    match v {
        V::Null => true,
        V::Bool(b) => !b,
        V::Int(i) => *i == 0,
        V::Uint(u) => *u == 0,
        V::Double(d) => *d == 0.0,
        V::String(s) => s.is_empty(),
        V::Bytes(b) => b.is_empty(),
        V::List(l) => l.items.is_empty(),
        V::Map(m) => m.entries.is_empty(),
        V::Duration(d) => *d == 0,
        _ => false,
    }
}

/// Standard base64 (with or without padding), as Go's `[]byte` JSON form.
pub(crate) fn base64_decode(s: &str) -> Option<Vec<u8>> {
    fn val(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => u32::from(c - b'A'),
            b'a'..=b'z' => u32::from(c - b'a') + 26,
            b'0'..=b'9' => u32::from(c - b'0') + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        })
    }
    let s = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut buf = 0u32;
    let mut bits = 0;
    for c in s.bytes() {
        buf = (buf << 6) | val(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buf >> bits) as u8);
            buf &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// The runtime cost of a call beyond its arguments (cel-go's
/// `CostTracker.costCall`), from the sizes of the receiver and arguments.
pub(crate) fn call_cost(name: &str, target: Option<u64>, args: &[u64]) -> u64 {
    let traverse = |n: u64| n.div_ceil(10);
    let first = target.or_else(|| args.first().copied()).unwrap_or(1);
    match name {
        // Evaluated lazily, counted by the interpreter through their operands.
        "_&&_" | "_||_" | "_?_:_" | "@not_strictly_false" => 0,
        "contains" | "startsWith" | "endsWith" | "lowerAscii" | "upperAscii" | "trim"
        | "reverse" | "charAt" | "indexOf" | "lastIndexOf" | "substring" | "split" | "replace"
        | "url" | "isURL" | "ip" | "isIP" | "cidr" | "isCIDR" | "quantity" | "isQuantity"
        | "string" | "bytes" | "timestamp" | "duration" | "validate" => {
            traverse(first).saturating_add(1)
        }
        "matches" | "find" | "findAll" => {
            let (s, re) = match (target, args) {
                (Some(s), [re, ..]) => (s, *re),
                (None, [s, re, ..]) => (*s, *re),
                _ => (first, 1),
            };
            traverse(s)
                .saturating_mul(re.div_ceil(4).max(1))
                .saturating_add(1)
        }
        "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" => {
            let small = args.iter().copied().min().unwrap_or(1);
            traverse(small).saturating_add(1)
        }
        "_+_" => args
            .iter()
            .copied()
            .fold(1u64, |a, b| a.saturating_add(traverse(b))),
        // Sizes of unbounded values are u64::MAX: every sum saturates.
        "@in" => args.get(1).copied().unwrap_or(1).saturating_add(1),
        "join" | "isSorted" | "sum" | "min" | "max" | "sets.contains" | "sets.equivalent"
        | "sets.intersects" | "flatten" | "distinct" => args
            .iter()
            .fold(first, |a, b| a.saturating_add(*b))
            .saturating_add(1),
        _ => 1,
    }
}
