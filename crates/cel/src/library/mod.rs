//! Kubernetes' CEL libraries (`k8s.io/apiserver/pkg/cel/library`) and the
//! cel-go extensions Kubernetes enables (strings, sets).

pub mod cidr;
pub mod format;
pub mod ip;
pub mod quantity;
pub mod url;

use std::sync::Arc;

use crate::EvalError;
use crate::functions::{CallContext, CallResult, compare, no_overload};
use crate::value::{EvalValue, equals};

pub(crate) fn call(
    name: &str,
    target: Option<&EvalValue>,
    args: &[EvalValue],
    cx: &mut CallContext,
) -> Option<CallResult> {
    if let Some(r) = lists(name, target, args) {
        return Some(r);
    }
    if let Some(r) = strings(name, target, args) {
        return Some(r);
    }
    if let Some(r) = regex(name, target, args, cx) {
        return Some(r);
    }
    if let Some(r) = sets(name, target, args) {
        return Some(r);
    }
    quantity::call(name, target, args)
        .or_else(|| url::call(name, target, args))
        .or_else(|| ip::call(name, target, args))
        .or_else(|| cidr::call(name, target, args))
        .or_else(|| format::call(name, target, args))
}

/// `k8s.io/apiserver/pkg/cel/library/lists.go`.
fn lists(name: &str, target: Option<&EvalValue>, args: &[EvalValue]) -> Option<CallResult> {
    let Some(EvalValue::List(l)) = target else {
        return None;
    };
    let items = &l.items;
    let r = match (name, args) {
        ("isSorted", []) => (|| {
            for w in items.windows(2) {
                if compare(&w[0], &w[1])? == std::cmp::Ordering::Greater {
                    return Ok(EvalValue::Bool(false));
                }
            }
            Ok(EvalValue::Bool(true))
        })(),
        ("sum", []) => (|| {
            let mut acc = match items.first() {
                None => return Ok(EvalValue::Int(0)),
                Some(EvalValue::Double(_)) => EvalValue::Double(0.0),
                Some(EvalValue::Uint(_)) => EvalValue::Uint(0),
                Some(EvalValue::Duration(_)) => EvalValue::Duration(0),
                Some(_) => EvalValue::Int(0),
            };
            for i in items {
                acc = crate::functions::call(
                    "_+_",
                    None,
                    &[acc, i.clone()],
                    &mut CallContext::default(),
                )?;
            }
            Ok(acc)
        })(),
        ("min" | "max", []) => (|| {
            let mut best = items
                .first()
                .ok_or_else(|| EvalError::Other(format!("{name} called on empty list")))?;
            for i in &items[1..] {
                let o = compare(i, best)?;
                if (name == "min" && o == std::cmp::Ordering::Less)
                    || (name == "max" && o == std::cmp::Ordering::Greater)
                {
                    best = i;
                }
            }
            Ok(best.clone())
        })(),
        ("indexOf", [x]) => Ok(EvalValue::Int(
            items
                .iter()
                .position(|i| equals(i, x))
                .map_or(-1, |p| p as i64),
        )),
        ("lastIndexOf", [x]) => Ok(EvalValue::Int(
            items
                .iter()
                .rposition(|i| equals(i, x))
                .map_or(-1, |p| p as i64),
        )),
        ("join", []) | ("join", [EvalValue::String(_)]) => (|| {
            let sep = args.first().and_then(EvalValue::as_str).unwrap_or("");
            let mut parts = Vec::with_capacity(items.len());
            for i in items {
                parts.push(i.as_str().ok_or_else(no_overload)?);
            }
            Ok(EvalValue::from(parts.join(sep)))
        })(),
        // cel-go's lists extension.
        ("slice", [EvalValue::Int(a), EvalValue::Int(b)]) => {
            let (a, b) = (*a, *b);
            if a < 0 || b < a || b as usize > items.len() {
                Err(EvalError::Other(format!(
                    "cannot slice({a}, {b}), list is length {}",
                    items.len()
                )))
            } else {
                Ok(EvalValue::list(items[a as usize..b as usize].to_vec()))
            }
        }
        ("flatten", []) => {
            let mut out = Vec::new();
            for i in items {
                match i {
                    EvalValue::List(inner) => out.extend(inner.items.iter().cloned()),
                    other => out.push(other.clone()),
                }
            }
            Ok(EvalValue::list(out))
        }
        ("distinct", []) => {
            let mut out: Vec<EvalValue> = Vec::new();
            for i in items {
                if !out.iter().any(|o| equals(o, i)) {
                    out.push(i.clone());
                }
            }
            Ok(EvalValue::list(out))
        }
        _ => return None,
    };
    Some(r)
}

/// cel-go's strings extension (version 2, as Kubernetes configures it).
fn strings(name: &str, target: Option<&EvalValue>, args: &[EvalValue]) -> Option<CallResult> {
    use EvalValue as V;
    if name == "strings.quote" {
        let [V::String(s)] = args else {
            return Some(Err(no_overload()));
        };
        return Some(Ok(V::from(format!("{s:?}"))));
    }
    let Some(V::String(s)) = target else {
        return None;
    };
    let chars = || s.chars().collect::<Vec<char>>();
    let out_of_range = |i: i64| EvalError::Other(format!("index out of range: {i}"));
    let r = match (name, args) {
        ("lowerAscii", []) => Ok(V::from(s.to_ascii_lowercase())),
        ("upperAscii", []) => Ok(V::from(s.to_ascii_uppercase())),
        ("trim", []) => Ok(V::from(s.trim())),
        ("reverse", []) => Ok(V::from(s.chars().rev().collect::<String>())),
        ("charAt", [V::Int(i)]) => {
            let c = chars();
            match usize::try_from(*i) {
                Ok(u) if u < c.len() => Ok(V::from(c[u].to_string())),
                Ok(u) if u == c.len() => Ok(V::from("")),
                _ => Err(out_of_range(*i)),
            }
        }
        ("indexOf", [V::String(sub)]) => Ok(V::Int(char_index(s, sub, 0).unwrap_or(-1))),
        ("indexOf", [V::String(sub), V::Int(from)]) => {
            let n = s.chars().count() as i64;
            if *from < 0 || *from > n {
                Err(out_of_range(*from))
            } else {
                Ok(V::Int(char_index(s, sub, *from as usize).unwrap_or(-1)))
            }
        }
        ("lastIndexOf", [V::String(sub)]) => {
            let c = chars();
            let sc: Vec<char> = sub.chars().collect();
            Ok(V::Int(
                last_index(&c, &sc, c.len()).map_or(-1, |i| i as i64),
            ))
        }
        ("lastIndexOf", [V::String(sub), V::Int(from)]) => {
            let c = chars();
            if *from < 0 || *from as usize > c.len() {
                Err(out_of_range(*from))
            } else {
                let sc: Vec<char> = sub.chars().collect();
                let limit = (*from as usize + sc.len()).min(c.len());
                Ok(V::Int(last_index(&c, &sc, limit).map_or(-1, |i| i as i64)))
            }
        }
        ("replace", [V::String(a), V::String(b)]) => replace_bounded(s, a, b, usize::MAX),
        ("replace", [V::String(a), V::String(b), V::Int(n)]) => {
            replace_bounded(s, a, b, usize::try_from(*n).unwrap_or(usize::MAX))
        }
        ("split", [V::String(sep)]) => Ok(split(s, sep, -1)),
        ("split", [V::String(sep), V::Int(n)]) => Ok(split(s, sep, *n)),
        ("substring", [V::Int(a)]) => {
            let c = chars();
            match usize::try_from(*a) {
                Ok(a) if a <= c.len() => Ok(V::from(c[a..].iter().collect::<String>())),
                _ => Err(out_of_range(*a)),
            }
        }
        ("substring", [V::Int(a), V::Int(b)]) => {
            let c = chars();
            match (usize::try_from(*a), usize::try_from(*b)) {
                (Ok(x), Ok(y)) if x <= y && y <= c.len() => {
                    Ok(V::from(c[x..y].iter().collect::<String>()))
                }
                (Ok(x), Ok(y)) if x > y => Err(EvalError::Other(format!(
                    "invalid substring range. start: {a}, end: {b}"
                ))),
                _ => Err(out_of_range(if *a < 0 { *a } else { *b })),
            }
        }
        ("format", [V::List(l)]) => format_string(s, &l.items),
        _ => return None,
    };
    Some(r)
}

/// The most bytes a string function may produce: `replace` can multiply its
/// input, which the cost model (counting the input) does not see.
const MAX_STRING_RESULT: usize = 1 << 24;

fn replace_bounded(s: &str, from: &str, to: &str, n: usize) -> CallResult {
    let matches = if from.is_empty() {
        s.chars().count() + 1
    } else {
        s.matches(from).count()
    }
    .min(n);
    let size = s.len().saturating_add(matches.saturating_mul(to.len()));
    if size > MAX_STRING_RESULT {
        return Err(EvalError::Other(format!(
            "replace result exceeds {MAX_STRING_RESULT} bytes"
        )));
    }
    Ok(EvalValue::from(if n == usize::MAX {
        s.replace(from, to)
    } else {
        s.replacen(from, to, n)
    }))
}

fn char_index(s: &str, sub: &str, from: usize) -> Option<i64> {
    let byte_from = s.char_indices().nth(from).map_or(s.len(), |(b, _)| b);
    let pos = s[byte_from..].find(sub)? + byte_from;
    Some(s[..pos].chars().count() as i64)
}

fn last_index(c: &[char], sub: &[char], limit: usize) -> Option<usize> {
    if sub.len() > limit {
        return None;
    }
    (0..=limit - sub.len())
        .rev()
        .find(|&i| c[i..i + sub.len()] == *sub)
}

fn split(s: &str, sep: &str, n: i64) -> EvalValue {
    let parts: Vec<EvalValue> = match n {
        0 => Vec::new(),
        n if n < 0 => {
            if sep.is_empty() {
                s.chars().map(|c| EvalValue::from(c.to_string())).collect()
            } else {
                s.split(sep).map(EvalValue::from).collect()
            }
        }
        n => {
            if sep.is_empty() {
                let c: Vec<char> = s.chars().collect();
                let n = (n as usize).min(c.len().max(1));
                let mut out: Vec<EvalValue> = c
                    .iter()
                    .take(n.saturating_sub(1))
                    .map(|c| EvalValue::from(c.to_string()))
                    .collect();
                out.push(EvalValue::from(
                    c.iter().skip(n.saturating_sub(1)).collect::<String>(),
                ));
                out
            } else {
                s.splitn(n as usize, sep).map(EvalValue::from).collect()
            }
        }
    };
    EvalValue::list(parts)
}

/// `"%s and %d".format([a, b])`: the verbs Kubernetes rules use.
fn format_string(fmt: &str, args: &[EvalValue]) -> CallResult {
    let mut out = String::new();
    let mut next = args.iter();
    let mut it = fmt.chars().peekable();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut precision = None;
        if it.peek() == Some(&'.') {
            it.next();
            let mut p = String::new();
            while let Some(d) = it.peek().filter(|d| d.is_ascii_digit()) {
                p.push(*d);
                it.next();
            }
            // Bounded: the precision is user input and sizes the output.
            precision = p.parse::<usize>().ok().map(|p| p.min(100));
        }
        let verb = it
            .next()
            .ok_or_else(|| EvalError::Other("unexpected end of format string".into()))?;
        if verb == '%' {
            out.push('%');
            continue;
        }
        let arg = next
            .next()
            .ok_or_else(|| EvalError::Other(format!("index {} out of range", args.len())))?;
        match (verb, arg) {
            ('s', v) => out.push_str(&v.to_string()),
            ('d', EvalValue::Int(_) | EvalValue::Uint(_)) => out.push_str(&arg.to_string()),
            ('f', EvalValue::Double(d)) => {
                out.push_str(&format!("{:.*}", precision.unwrap_or(6), d))
            }
            ('f', EvalValue::Int(i)) => {
                out.push_str(&format!("{:.*}", precision.unwrap_or(6), *i as f64))
            }
            ('e', EvalValue::Double(d)) => {
                out.push_str(&format!("{:.*e}", precision.unwrap_or(6), d))
            }
            ('x', EvalValue::Int(i)) => out.push_str(&format!("{i:x}")),
            ('x', EvalValue::String(s)) => {
                s.bytes().for_each(|b| out.push_str(&format!("{b:02x}")))
            }
            ('o', EvalValue::Int(i)) => out.push_str(&format!("{i:o}")),
            ('b', EvalValue::Int(i)) => out.push_str(&format!("{i:b}")),
            _ => {
                return Err(EvalError::Other(format!(
                    "error during formatting: unrecognized formatting clause \"{verb}\""
                )));
            }
        }
    }
    Ok(EvalValue::from(out))
}

/// `k8s.io/apiserver/pkg/cel/library/regex.go`: `find`, `findAll`.
fn regex(
    name: &str,
    target: Option<&EvalValue>,
    args: &[EvalValue],
    cx: &mut CallContext,
) -> Option<CallResult> {
    let Some(EvalValue::String(s)) = target else {
        return None;
    };
    let r = match (name, args) {
        ("find", [EvalValue::String(re)]) => cx
            .regex(re)
            .map(|r| EvalValue::from(r.find(s).map_or("", |m| m.as_str()))),
        ("findAll", [EvalValue::String(re)]) => cx.regex(re).map(|r| {
            EvalValue::list(
                r.find_iter(s)
                    .map(|m| EvalValue::from(m.as_str()))
                    .collect(),
            )
        }),
        ("findAll", [EvalValue::String(re), EvalValue::Int(n)]) => cx.regex(re).map(|r| {
            let take = if *n < 0 { usize::MAX } else { *n as usize };
            EvalValue::list(
                r.find_iter(s)
                    .take(take)
                    .map(|m| EvalValue::from(m.as_str()))
                    .collect(),
            )
        }),
        _ => return None,
    };
    Some(r)
}

/// cel-go's sets extension: `sets.contains`, `sets.equivalent`,
/// `sets.intersects`.
fn sets(name: &str, target: Option<&EvalValue>, args: &[EvalValue]) -> Option<CallResult> {
    if target.is_some() {
        return None;
    }
    let [EvalValue::List(a), EvalValue::List(b)] = args else {
        return None;
    };
    let has =
        |l: &Arc<crate::value::ListValue>, x: &EvalValue| l.items.iter().any(|i| equals(i, x));
    let r = match name {
        "sets.contains" => b.items.iter().all(|x| has(a, x)),
        "sets.equivalent" => b.items.iter().all(|x| has(a, x)) && a.items.iter().all(|x| has(b, x)),
        "sets.intersects" => b.items.iter().any(|x| has(a, x)),
        _ => return None,
    };
    Some(Ok(EvalValue::Bool(r)))
}
