//! Field paths and sets of them, and their `FieldsV1` encoding (structured-merge-diff's
//! `fieldpath`): `f:<name>` a field, `k:{"key":value,...}` a list item by its keys
//! (sorted by key name), `v:<json>` a set item, `i:<index>` a list item by position,
//! and `.` inside an element's object when the element itself is in the set.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

/// One step of a path.
#[derive(Debug, Clone)]
pub enum PathElement {
    Field(String),
    /// A list item by its key fields, sorted by name.
    Key(Vec<(String, Value)>),
    /// A set item by value.
    Value(Value),
    Index(usize),
}

/// upstream's value ordering: numbers, strings, booleans, lists, maps, null.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(v: &Value) -> u8 {
        match v {
            Value::Number(_) => 0,
            Value::String(_) => 1,
            Value::Bool(_) => 2,
            Value::Array(_) => 3,
            Value::Object(_) => 4,
            Value::Null => 5,
        }
    }
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_i64(), y.as_i64()) {
                return x.cmp(&y);
            }
            let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
            x.partial_cmp(&y).unwrap_or(Ordering::Equal)
        }
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y) {
                let c = compare_values(p, q);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            let mut xs: Vec<_> = x.iter().collect();
            let mut ys: Vec<_> = y.iter().collect();
            xs.sort_by(|p, q| p.0.cmp(q.0));
            ys.sort_by(|p, q| p.0.cmp(q.0));
            for ((ka, va), (kb, vb)) in xs.iter().zip(&ys) {
                let c = ka.cmp(kb).then_with(|| compare_values(va, vb));
                if c != Ordering::Equal {
                    return c;
                }
            }
            xs.len().cmp(&ys.len())
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

impl PathElement {
    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }

    /// The `FieldsV1` key of this element (without children).
    pub fn encode(&self) -> String {
        match self {
            PathElement::Field(n) => format!("f:{n}"),
            PathElement::Key(fields) => {
                let mut m = Map::new();
                for (k, v) in fields {
                    m.insert(k.clone(), v.clone());
                }
                format!("k:{}", Value::Object(m))
            }
            PathElement::Value(v) => format!("v:{v}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a `FieldsV1` key (not `.`).
    pub fn decode(s: &str) -> Result<PathElement, FieldsError> {
        let bad = || FieldsError::Element(s.to_string());
        let (tag, rest) = s.split_once(':').ok_or_else(bad)?;
        match tag {
            "f" => Ok(PathElement::Field(rest.to_string())),
            "k" => match serde_json::from_str::<Value>(rest) {
                Ok(Value::Object(m)) => {
                    let mut fields: Vec<(String, Value)> = m.into_iter().collect();
                    fields.sort_by(|a, b| a.0.cmp(&b.0));
                    Ok(PathElement::Key(fields))
                }
                _ => Err(bad()),
            },
            "v" => serde_json::from_str(rest)
                .map(PathElement::Value)
                .map_err(|_| bad()),
            "i" => rest.parse().map(PathElement::Index).map_err(|_| bad()),
            _ => Err(bad()),
        }
    }
}

impl PartialEq for PathElement {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for PathElement {}
impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for PathElement {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => {
                for ((ka, va), (kb, vb)) in a.iter().zip(b) {
                    let c = ka.cmp(kb).then_with(|| compare_values(va, vb));
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                a.len().cmp(&b.len())
            }
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

/// upstream's rendering: `.name`, `[k=v,k2=v2]`, `[=v]`, `[i]`.
impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(n) => write!(f, ".{n}"),
            PathElement::Key(fields) => {
                let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={v}]"),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path from the object's root.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Path(pub Vec<PathElement>);

impl Path {
    /// A path of field names (`["spec", "replicas"]`).
    pub fn fields(names: &[&str]) -> Path {
        Path(
            names
                .iter()
                .map(|n| PathElement::Field((*n).to_string()))
                .collect(),
        )
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for pe in &self.0 {
            write!(f, "{pe}")?;
        }
        Ok(())
    }
}

/// Malformed `FieldsV1`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldsError {
    #[error("expected an object in FieldsV1, got {0}")]
    NotObject(String),
    #[error("invalid path element in FieldsV1: {0:?}")]
    Element(String),
}

/// A set of paths, as a tree: `members` are paths in the set ending here, `children`
/// the sets below an element. A member and a child with the same element are
/// independent (an element can be owned without its content, and vice versa).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: std::collections::BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// Whether an element is a member at this level.
    pub fn has_member(&self, pe: &PathElement) -> bool {
        self.members.contains(pe)
    }

    /// The set below an element, if any.
    pub fn child(&self, pe: &PathElement) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    /// The set below a path (empty when absent).
    pub fn at(&self, path: &[PathElement]) -> FieldSet {
        let mut cur = self;
        for pe in path {
            match cur.children.get(pe) {
                Some(c) => cur = c,
                None => return FieldSet::new(),
            }
        }
        cur.clone()
    }

    /// Puts `sub` below `path` (replacing what was there).
    pub fn set_at(&mut self, path: &[PathElement], sub: FieldSet) {
        match path {
            [] => *self = sub,
            [first, rest @ ..] => {
                let child = self.children.entry(first.clone()).or_default();
                child.set_at(rest, sub);
                if child.is_empty() {
                    self.children.remove(first);
                }
            }
        }
    }

    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, c) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(c),
                None => c.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        out.members = self.members.difference(&other.members).cloned().collect();
        for (pe, c) in &self.children {
            let d = match other.children.get(pe) {
                Some(o) => c.difference(o),
                None => c.clone(),
            };
            if !d.is_empty() {
                out.children.insert(pe.clone(), d);
            }
        }
        out
    }

    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet::new();
        out.members = self.members.intersection(&other.members).cloned().collect();
        for (pe, c) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let i = c.intersection(o);
                if !i.is_empty() {
                    out.children.insert(pe.clone(), i);
                }
            }
        }
        out
    }

    /// Every path in the set, upstream's order: this level's members, then each
    /// child's paths.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Path>) {
        for m in &self.members {
            let mut p = prefix.clone();
            p.push(m.clone());
            out.push(Path(p));
        }
        for (pe, c) in &self.children {
            prefix.push(pe.clone());
            c.collect(prefix, out);
            prefix.pop();
        }
    }

    /// Makes every field element that has children a member too (upstream's
    /// `EnsureNamedFieldsAreMembers`): removing a struct field nobody owns anything
    /// under then removes it whole.
    pub fn with_named_fields_as_members(&self) -> FieldSet {
        let mut out = FieldSet::new();
        out.members = self.members.clone();
        for (pe, c) in &self.children {
            if matches!(pe, PathElement::Field(_)) {
                out.members.insert(pe.clone());
            }
            out.children
                .insert(pe.clone(), c.with_named_fields_as_members());
        }
        out
    }

    /// The set without paths under any of `prefixes` (each a path of field names).
    pub fn without_prefixes(&self, prefixes: &[Path]) -> FieldSet {
        let mut out = self.clone();
        for p in prefixes {
            out.remove_prefix(&p.0);
        }
        out
    }

    fn remove_prefix(&mut self, path: &[PathElement]) {
        match path {
            [] => *self = FieldSet::new(),
            [last] => {
                self.members.remove(last);
                self.children.remove(last);
            }
            [first, rest @ ..] => {
                if let Some(c) = self.children.get_mut(first) {
                    c.remove_prefix(rest);
                    if c.is_empty() {
                        self.children.remove(first);
                    }
                }
            }
        }
    }

    /// The `FieldsV1` JSON object.
    pub fn to_fields_v1(&self) -> Value {
        Value::Object(self.emit(false))
    }

    fn emit(&self, include_self: bool) -> Map<String, Value> {
        let mut out = Map::new();
        if include_self && !self.is_empty() {
            out.insert(".".into(), Value::Object(Map::new()));
        }
        let mut members = self.members.iter().peekable();
        let mut children = self.children.iter().peekable();
        loop {
            let next_member = members.peek().copied();
            let next_child = children.peek().map(|(pe, _)| *pe);
            match (next_member, next_child) {
                (None, None) => break,
                (Some(m), None) => {
                    out.insert(m.encode(), Value::Object(Map::new()));
                    members.next();
                }
                (None, Some(_)) => {
                    if let Some((pe, c)) = children.next() {
                        out.insert(pe.encode(), Value::Object(c.emit(false)));
                    }
                }
                (Some(m), Some(pe)) => match m.cmp(pe) {
                    Ordering::Less => {
                        out.insert(m.encode(), Value::Object(Map::new()));
                        members.next();
                    }
                    Ordering::Greater => {
                        if let Some((pe, c)) = children.next() {
                            out.insert(pe.encode(), Value::Object(c.emit(false)));
                        }
                    }
                    Ordering::Equal => {
                        members.next();
                        if let Some((pe, c)) = children.next() {
                            out.insert(pe.encode(), Value::Object(c.emit(true)));
                        }
                    }
                },
            }
        }
        out
    }

    /// Parses a `FieldsV1` JSON object.
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, FieldsError> {
        let Value::Object(m) = v else {
            return Err(FieldsError::NotObject(v.to_string()));
        };
        let mut out = FieldSet::new();
        for (k, child) in m {
            if k == "." {
                continue;
            }
            let pe = PathElement::decode(k)?;
            let Value::Object(cm) = child else {
                return Err(FieldsError::NotObject(child.to_string()));
            };
            if cm.is_empty() || cm.contains_key(".") {
                out.members.insert(pe.clone());
            }
            let sub = FieldSet::from_fields_v1(child)?;
            if !sub.is_empty() {
                out.children.insert(pe, sub);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(n: &str) -> PathElement {
        PathElement::Field(n.into())
    }

    #[test]
    fn fields_v1_roundtrip_in_upstream_order() {
        let v = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}}
                }}}
            },
            "f:finalizers": {"v:\"a\"": {}, "v:\"b\"": {}},
        });
        let s = FieldSet::from_fields_v1(&v).unwrap();
        assert!(s.has(&[f("spec"), f("replicas")]));
        assert!(s.has(&[f("metadata"), f("labels")]));
        assert!(!s.has(&[f("metadata")]));
        let out = s.to_fields_v1();
        // `.` first, fields sorted.
        assert_eq!(
            serde_json::to_string(&out["f:metadata"]).unwrap(),
            r#"{"f:labels":{".":{},"f:app":{}}}"#
        );
        let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["f:finalizers", "f:metadata", "f:spec"]);
        assert_eq!(FieldSet::from_fields_v1(&out).unwrap(), s);
    }

    #[test]
    fn key_elements_sort_their_fields() {
        let pe = PathElement::decode(r#"k:{"protocol":"TCP","containerPort":80}"#).unwrap();
        assert_eq!(pe.encode(), r#"k:{"containerPort":80,"protocol":"TCP"}"#);
        assert_eq!(pe.to_string(), r#"[containerPort=80,protocol="TCP"]"#);
        assert_eq!(PathElement::decode("i:3").unwrap().to_string(), "[3]");
        assert_eq!(
            PathElement::decode("v:\"x\"").unwrap().to_string(),
            "[=\"x\"]"
        );
    }

    #[test]
    fn malformed_fields_v1_is_an_error() {
        for bad in [
            json!([]),
            json!({"x:y": {}}),
            json!({"f:a": 1}),
            json!({"k:notjson": {}}),
            json!({"i:x": {}}),
            json!({"nocolon": {}}),
        ] {
            assert!(FieldSet::from_fields_v1(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn set_operations() {
        let mut a = FieldSet::new();
        a.insert(&[f("spec"), f("replicas")]);
        a.insert(&[f("spec"), f("paused")]);
        let mut b = FieldSet::new();
        b.insert(&[f("spec"), f("replicas")]);
        b.insert(&[f("metadata"), f("labels"), f("x")]);
        assert_eq!(
            a.intersection(&b).paths(),
            vec![Path::fields(&["spec", "replicas"])]
        );
        assert_eq!(
            a.difference(&b).paths(),
            vec![Path::fields(&["spec", "paused"])]
        );
        assert_eq!(a.union(&b).paths().len(), 3);
        assert!(a.difference(&a).is_empty());
        let named = b.with_named_fields_as_members();
        assert!(named.has(&[f("metadata")]));
        assert!(named.has(&[f("metadata"), f("labels")]));
        assert_eq!(
            a.union(&b)
                .without_prefixes(&[Path::fields(&["spec"])])
                .paths(),
            vec![Path::fields(&["metadata", "labels", "x"])]
        );
        assert_eq!(
            Path::fields(&["spec", "replicas"]).to_string(),
            ".spec.replicas"
        );
    }
}
