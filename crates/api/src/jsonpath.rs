//! The JSONPath subset CRDs use (`additionalPrinterColumns[*].jsonPath`,
//! `selectableFields`): upstream evaluates these with client-go's `jsonpath`
//! package inside `{…}`. Supported: `.field`, `['field']` and `["field"]`,
//! `[N]` (negative counts from the end), `[*]`, `.*`, and filters
//! `[?(@.a.b == "x")]` / `!=` / `<` `<=` `>` `>=` on strings and numbers, or
//! `[?(@.a)]` for presence.

use serde_json::Value;

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    Wildcard,
    Filter(Filter),
}

#[derive(Debug, Clone, PartialEq)]
struct Filter {
    path: Vec<Step>,
    op: Option<(Op, Value)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Why a path does not parse (wording as client-go's parser where it has one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

impl JsonPath {
    /// Parses `.spec.replicas`, with or without the template braces `{…}`.
    pub fn parse(s: &str) -> Result<JsonPath, ParseError> {
        let s = s.trim();
        let s = s
            .strip_prefix('{')
            .and_then(|t| t.strip_suffix('}'))
            .unwrap_or(s);
        let s = s.strip_prefix('$').unwrap_or(s);
        let (steps, rest) = parse_steps(s, false)?;
        if !rest.is_empty() {
            return Err(ParseError(format!(
                "unrecognized character in action: {rest}"
            )));
        }
        Ok(JsonPath { steps })
    }

    /// Every value the path reaches, in document order.
    pub fn find<'a>(&self, v: &'a Value) -> Vec<&'a Value> {
        eval(&self.steps, v)
    }
}

fn parse_steps(mut s: &str, in_filter: bool) -> Result<(Vec<Step>, &str), ParseError> {
    let mut steps = Vec::new();
    loop {
        if in_filter && (s.starts_with(' ') || s.starts_with(')') || s.is_empty()) {
            break;
        }
        if let Some(rest) = s.strip_prefix('.') {
            if let Some(r) = rest.strip_prefix('*') {
                steps.push(Step::Wildcard);
                s = r;
                continue;
            }
            // A field name runs to the next unescaped `.` or `[` (or a filter's end).
            let mut name = String::new();
            let mut chars = rest.char_indices().peekable();
            let mut end = rest.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            name.push(n);
                        }
                    }
                    '.' | '[' => {
                        end = i;
                        break;
                    }
                    ' ' | ')' | '=' | '!' | '<' | '>' if in_filter => {
                        end = i;
                        break;
                    }
                    c => name.push(c),
                }
            }
            if name.is_empty() {
                if rest.is_empty() && steps.is_empty() {
                    // `.` alone: the whole object.
                    s = rest;
                    break;
                }
                return Err(ParseError("invalid field: empty name".into()));
            }
            steps.push(Step::Field(name));
            s = &rest[end..];
        } else if let Some(rest) = s.strip_prefix('[') {
            let close = matching_bracket(rest)
                .ok_or_else(|| ParseError("unclosed array expect ]".into()))?;
            let inner = rest[..close].trim();
            s = &rest[close + 1..];
            steps.push(parse_bracket(inner)?);
        } else {
            break;
        }
    }
    Ok((steps, s))
}

/// The index of the `]` closing a bracket, skipping quoted strings and nested ones.
fn matching_bracket(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') if depth == 0 => return Some(i),
            (None, ']') => depth -= 1,
            _ => {}
        }
    }
    None
}

fn parse_bracket(inner: &str) -> Result<Step, ParseError> {
    if inner == "*" {
        return Ok(Step::Wildcard);
    }
    if let Some(q) = unquote(inner) {
        return Ok(Step::Field(q));
    }
    if let Some(f) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
        let f = f.trim();
        let rest = f
            .strip_prefix('@')
            .ok_or_else(|| ParseError(format!("unrecognized filter: {f}")))?;
        let (path, rest) = parse_steps(rest, true)?;
        let rest = rest.trim();
        if rest.is_empty() {
            return Ok(Step::Filter(Filter { path, op: None }));
        }
        let (op, lit) = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
        ]
        .iter()
        .find_map(|(t, op)| rest.strip_prefix(t).map(|r| (*op, r.trim())))
        .ok_or_else(|| ParseError(format!("unrecognized filter operator: {rest}")))?;
        let value = match unquote(lit) {
            Some(s) => Value::String(s),
            None => serde_json::from_str::<Value>(lit)
                .map_err(|_| ParseError(format!("unrecognized literal in filter: {lit}")))?,
        };
        return Ok(Step::Filter(Filter {
            path,
            op: Some((op, value)),
        }));
    }
    inner
        .parse::<i64>()
        .map(Step::Index)
        .map_err(|_| ParseError(format!("invalid array index {inner}")))
}

fn unquote(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if b.len() >= 2 && (b[0] == b'\'' || b[0] == b'"') && b[b.len() - 1] == b[0] {
        Some(s[1..s.len() - 1].to_string())
    } else {
        None
    }
}

fn eval<'a>(steps: &[Step], root: &'a Value) -> Vec<&'a Value> {
    let mut cur = vec![root];
    for step in steps {
        let mut next = Vec::new();
        for v in cur {
            match step {
                Step::Field(name) => {
                    if let Some(x) = v.get(name.as_str()) {
                        next.push(x);
                    }
                }
                Step::Index(i) => {
                    if let Some(a) = v.as_array() {
                        let len = a.len() as i64;
                        let idx = if *i < 0 { len + i } else { *i };
                        if (0..len).contains(&idx)
                            && let Some(x) = a.get(idx as usize)
                        {
                            next.push(x);
                        }
                    }
                }
                Step::Wildcard => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Step::Filter(f) => {
                    if let Some(a) = v.as_array() {
                        next.extend(a.iter().filter(|item| filter_matches(f, item)));
                    }
                }
            }
        }
        cur = next;
    }
    cur
}

fn filter_matches(f: &Filter, item: &Value) -> bool {
    let found = eval(&f.path, item);
    let Some((op, lit)) = &f.op else {
        return !found.is_empty();
    };
    found.iter().any(|v| match (v, lit) {
        (Value::String(a), Value::String(b)) => cmp(op, a.as_str().cmp(b.as_str())),
        (Value::Number(a), Value::Number(b)) => match (a.as_f64(), b.as_f64()) {
            (Some(a), Some(b)) => a.partial_cmp(&b).is_some_and(|o| cmp(op, o)),
            _ => false,
        },
        (a, b) => match op {
            Op::Eq => *a == b,
            Op::Ne => *a != b,
            _ => false,
        },
    })
}

fn cmp(op: &Op, o: std::cmp::Ordering) -> bool {
    use std::cmp::Ordering::*;
    match op {
        Op::Eq => o == Equal,
        Op::Ne => o != Equal,
        Op::Lt => o == Less,
        Op::Le => o != Greater,
        Op::Gt => o == Greater,
        Op::Ge => o != Less,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths() {
        let obj = json!({
            "metadata": {"name": "a", "labels": {"app.kubernetes.io/name": "web"}},
            "spec": {"replicas": 3, "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]},
            "status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Synced", "status": "False"}
            ]}
        });
        let cases: &[(&str, Value)] = &[
            (".spec.replicas", json!([3])),
            ("{.spec.replicas}", json!([3])),
            (".spec.ports[0].port", json!([80])),
            (".spec.ports[-1].name", json!(["https"])),
            (".spec.ports[*].port", json!([80, 443])),
            (".spec.ports[5].port", json!([])),
            (
                ".status.conditions[?(@.type==\"Ready\")].status",
                json!(["True"]),
            ),
            (
                ".status.conditions[?(@.type == 'Synced')].status",
                json!(["False"]),
            ),
            (
                ".status.conditions[?(@.status != \"True\")].type",
                json!(["Synced"]),
            ),
            (".spec.ports[?(@.port > 100)].name", json!(["https"])),
            (".spec.ports[?(@.name)].port", json!([80, 443])),
            (
                ".metadata.labels.app\\.kubernetes\\.io/name",
                json!(["web"]),
            ),
            (".metadata.labels['app.kubernetes.io/name']", json!(["web"])),
            (".spec.missing", json!([])),
            (".metadata.name.deeper", json!([])),
        ];
        for (path, want) in cases {
            let p = JsonPath::parse(path).unwrap_or_else(|e| panic!("{path}: {e}"));
            let got: Vec<Value> = p.find(&obj).into_iter().cloned().collect();
            assert_eq!(Value::Array(got), *want, "{path}");
        }
    }

    #[test]
    fn bad_paths_are_errors_not_panics() {
        for p in [
            ".spec[",
            ".spec[abc]",
            ".spec[?(@.a ~ 1)]",
            "spec",
            ".a..b",
            ".a[?(@.x == nope)]",
        ] {
            assert!(JsonPath::parse(p).is_err(), "{p}");
        }
    }
}
