//! CEL runtime values (cel-go's `ref.Val`), with Kubernetes' equality for
//! `x-kubernetes-list-type: set|map` lists and the Kubernetes extension types
//! (Quantity, URL, IP, CIDR, format).

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use berth_api::quantity::Quantity;
use chrono::{DateTime, FixedOffset};
use serde_json::Value;

use crate::library::cidr::Cidr;
use crate::library::url::Url;

/// A CEL value.
#[derive(Clone, Debug)]
pub enum EvalValue {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(Arc<str>),
    Bytes(Arc<[u8]>),
    List(Arc<ListValue>),
    Map(Arc<MapValue>),
    /// Nanoseconds, as Go's `time.Duration`.
    Duration(i64),
    /// Keeps the offset it was written with, as Go's `time.Time` does for
    /// `string()`; compares as an instant.
    Timestamp(DateTime<FixedOffset>),
    /// A type value, as `type(x)` returns; holds the type's CEL name.
    Type(Arc<str>),
    Optional(Option<Box<EvalValue>>),
    Quantity(Arc<Quantity>),
    Url(Arc<Url>),
    Ip(IpAddr),
    Cidr(Cidr),
    /// A named format of `format.named(...)`.
    Format(Arc<str>),
}

/// How a list compares for equality: Kubernetes' `x-kubernetes-list-type`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum ListType {
    #[default]
    Atomic,
    /// Order-insensitive equality.
    Set,
    /// Elements matched by these keys (escaped CEL field names), order-insensitive.
    Map(Arc<[String]>),
}

#[derive(Clone, Debug, Default)]
pub struct ListValue {
    pub items: Vec<EvalValue>,
    pub list_type: ListType,
}

/// A map key: CEL allows bool, int, uint and string keys.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    Bool(bool),
    Int(i64),
    Uint(u64),
    String(Arc<str>),
}

impl Key {
    pub fn from_value(v: &EvalValue) -> Option<Key> {
        match v {
            EvalValue::Bool(b) => Some(Key::Bool(*b)),
            EvalValue::Int(i) => Some(Key::Int(*i)),
            EvalValue::Uint(u) => Some(Key::Uint(*u)),
            EvalValue::String(s) => Some(Key::String(s.clone())),
            _ => None,
        }
    }

    pub fn to_value(&self) -> EvalValue {
        match self {
            Key::Bool(b) => EvalValue::Bool(*b),
            Key::Int(i) => EvalValue::Int(*i),
            Key::Uint(u) => EvalValue::Uint(*u),
            Key::String(s) => EvalValue::String(s.clone()),
        }
    }
}

/// A map or a schema object (`type: object` with `properties`).
#[derive(Clone, Debug, Default)]
pub struct MapValue {
    pub entries: BTreeMap<Key, EvalValue>,
    /// `Some` for an object of a schema with properties: field selection on a
    /// missing field is then `no such key`, as for maps, but `type()` names it.
    pub object_type: Option<Arc<str>>,
}

impl MapValue {
    /// Looks a key up with CEL's numeric key equivalence (`m[1u]` finds `1`).
    pub fn get(&self, key: &EvalValue) -> Option<&EvalValue> {
        if let Some(k) = Key::from_value(key)
            && let Some(v) = self.entries.get(&k)
        {
            return Some(v);
        }
        match key {
            EvalValue::Int(i) => u64::try_from(*i)
                .ok()
                .and_then(|u| self.entries.get(&Key::Uint(u))),
            EvalValue::Uint(u) => i64::try_from(*u)
                .ok()
                .and_then(|i| self.entries.get(&Key::Int(i))),
            EvalValue::Double(d) => {
                if d.fract() != 0.0 || !d.is_finite() {
                    return None;
                }
                // The range checks keep the casts exact.
                let as_int = (*d >= -9.223_372_036_854_776e18 && *d < 9.223_372_036_854_776e18)
                    .then_some(*d as i64);
                let as_uint = (*d >= 0.0 && *d < 1.844_674_407_370_955_2e19).then_some(*d as u64);
                as_int
                    .and_then(|i| self.entries.get(&Key::Int(i)))
                    .or_else(|| as_uint.and_then(|u| self.entries.get(&Key::Uint(u))))
            }
            _ => None,
        }
    }

    pub fn get_str(&self, key: &str) -> Option<&EvalValue> {
        self.entries.get(&Key::String(Arc::from(key)))
    }
}

impl EvalValue {
    pub fn string(s: impl AsRef<str>) -> EvalValue {
        EvalValue::String(Arc::from(s.as_ref()))
    }

    pub fn list(items: Vec<EvalValue>) -> EvalValue {
        EvalValue::List(Arc::new(ListValue {
            items,
            list_type: ListType::Atomic,
        }))
    }

    pub fn map(entries: BTreeMap<Key, EvalValue>) -> EvalValue {
        EvalValue::Map(Arc::new(MapValue {
            entries,
            object_type: None,
        }))
    }

    /// The CEL type name, as `type(x)` and error messages spell it.
    pub fn type_name(&self) -> String {
        match self {
            EvalValue::Null => "null_type".into(),
            EvalValue::Bool(_) => "bool".into(),
            EvalValue::Int(_) => "int".into(),
            EvalValue::Uint(_) => "uint".into(),
            EvalValue::Double(_) => "double".into(),
            EvalValue::String(_) => "string".into(),
            EvalValue::Bytes(_) => "bytes".into(),
            EvalValue::List(_) => "list".into(),
            EvalValue::Map(m) => match &m.object_type {
                Some(t) => t.to_string(),
                None => "map".into(),
            },
            EvalValue::Duration(_) => "google.protobuf.Duration".into(),
            EvalValue::Timestamp(_) => "google.protobuf.Timestamp".into(),
            EvalValue::Type(_) => "type".into(),
            EvalValue::Optional(_) => "optional_type".into(),
            EvalValue::Quantity(_) => "kubernetes.Quantity".into(),
            EvalValue::Url(_) => "kubernetes.URL".into(),
            EvalValue::Ip(_) => "net.IP".into(),
            EvalValue::Cidr(_) => "net.CIDR".into(),
            EvalValue::Format(_) => "kubernetes.NamedFormat".into(),
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            EvalValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            EvalValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// Size as the runtime cost model counts it: bytes of a string, elements
    /// of a list or map, 1 otherwise.
    pub fn cost_size(&self) -> u64 {
        match self {
            EvalValue::String(s) => s.len() as u64,
            EvalValue::Bytes(b) => b.len() as u64,
            EvalValue::List(l) => l.items.len() as u64,
            EvalValue::Map(m) => m.entries.len() as u64,
            _ => 1,
        }
    }

    /// Back to JSON, where the value has a JSON form.
    pub fn to_json(&self) -> Option<Value> {
        Some(match self {
            EvalValue::Null => Value::Null,
            EvalValue::Bool(b) => Value::Bool(*b),
            EvalValue::Int(i) => Value::from(*i),
            EvalValue::Uint(u) => Value::from(*u),
            EvalValue::Double(d) => serde_json::Number::from_f64(*d).map(Value::Number)?,
            EvalValue::String(s) => Value::String(s.to_string()),
            EvalValue::List(l) => {
                Value::Array(l.items.iter().map(|v| v.to_json()).collect::<Option<_>>()?)
            }
            EvalValue::Map(m) => {
                let mut out = serde_json::Map::new();
                for (k, v) in &m.entries {
                    let key = match k {
                        Key::String(s) => {
                            if m.object_type.is_some() {
                                crate::schema::unescape(s)
                            } else {
                                s.to_string()
                            }
                        }
                        Key::Int(i) => i.to_string(),
                        Key::Uint(u) => u.to_string(),
                        Key::Bool(b) => b.to_string(),
                    };
                    out.insert(key, v.to_json()?);
                }
                Value::Object(out)
            }
            EvalValue::Duration(d) => Value::String(crate::functions::format_duration(*d)),
            EvalValue::Timestamp(t) => Value::String(crate::functions::format_timestamp(t)),
            EvalValue::Quantity(q) => Value::String(q.canonical()),
            EvalValue::Url(u) => Value::String(u.raw.clone()),
            EvalValue::Ip(ip) => Value::String(ip.to_string()),
            EvalValue::Cidr(c) => Value::String(c.to_string()),
            EvalValue::Optional(Some(v)) => v.to_json()?,
            _ => return None,
        })
    }
}

impl From<bool> for EvalValue {
    fn from(b: bool) -> Self {
        EvalValue::Bool(b)
    }
}
impl From<i64> for EvalValue {
    fn from(i: i64) -> Self {
        EvalValue::Int(i)
    }
}
impl From<f64> for EvalValue {
    fn from(d: f64) -> Self {
        EvalValue::Double(d)
    }
}
impl From<&str> for EvalValue {
    fn from(s: &str) -> Self {
        EvalValue::string(s)
    }
}
impl From<String> for EvalValue {
    fn from(s: String) -> Self {
        EvalValue::String(Arc::from(s))
    }
}

/// CEL's heterogeneous equality: numbers compare by value across int, uint and
/// double; values of different types are unequal (never an error).
pub fn equals(a: &EvalValue, b: &EvalValue) -> bool {
    use EvalValue as V;
    match (a, b) {
        (V::Null, V::Null) => true,
        (V::Bool(x), V::Bool(y)) => x == y,
        (V::String(x), V::String(y)) => x == y,
        (V::Bytes(x), V::Bytes(y)) => x == y,
        (V::Int(_) | V::Uint(_) | V::Double(_), V::Int(_) | V::Uint(_) | V::Double(_)) => {
            numeric_cmp(a, b) == Some(Ordering::Equal)
        }
        (V::Duration(x), V::Duration(y)) => x == y,
        (V::Timestamp(x), V::Timestamp(y)) => x == y,
        (V::Type(x), V::Type(y)) => x == y,
        (V::Optional(x), V::Optional(y)) => match (x, y) {
            (None, None) => true,
            (Some(x), Some(y)) => equals(x, y),
            _ => false,
        },
        (V::List(x), V::List(y)) => list_equals(x, y),
        (V::Map(x), V::Map(y)) => {
            x.entries.len() == y.entries.len()
                && x.entries
                    .iter()
                    .all(|(k, v)| y.get(&k.to_value()).is_some_and(|w| equals(v, w)))
        }
        (V::Quantity(x), V::Quantity(y)) => x.nanos() == y.nanos(),
        (V::Url(x), V::Url(y)) => x.raw == y.raw,
        (V::Ip(x), V::Ip(y)) => x == y,
        (V::Cidr(x), V::Cidr(y)) => x == y,
        (V::Format(x), V::Format(y)) => x == y,
        _ => false,
    }
}

fn list_equals(x: &ListValue, y: &ListValue) -> bool {
    if x.items.len() != y.items.len() {
        return false;
    }
    // Either side's list type decides, as upstream's unstructured lists do
    // (both sides come from the same schema in practice).
    let list_type = if x.list_type != ListType::Atomic {
        &x.list_type
    } else {
        &y.list_type
    };
    match list_type {
        ListType::Atomic => x.items.iter().zip(&y.items).all(|(a, b)| equals(a, b)),
        ListType::Set => {
            x.items.iter().all(|a| y.items.iter().any(|b| equals(a, b)))
                && y.items.iter().all(|b| x.items.iter().any(|a| equals(a, b)))
        }
        ListType::Map(keys) => x.items.iter().all(|a| {
            y.items
                .iter()
                .find(|b| map_keys_match(a, b, keys))
                .is_some_and(|b| equals(a, b))
        }),
    }
}

/// Whether two elements of a `list-type: map` list have the same keys.
pub fn map_keys_match(a: &EvalValue, b: &EvalValue, keys: &[String]) -> bool {
    let (EvalValue::Map(a), EvalValue::Map(b)) = (a, b) else {
        return false;
    };
    keys.iter().all(|k| match (a.get_str(k), b.get_str(k)) {
        (Some(x), Some(y)) => equals(x, y),
        (None, None) => true,
        _ => false,
    })
}

/// Orders numbers across int, uint and double (CEL's cross-type numeric
/// comparisons, which Kubernetes enables).
pub fn numeric_cmp(a: &EvalValue, b: &EvalValue) -> Option<Ordering> {
    use EvalValue as V;
    match (a, b) {
        (V::Int(x), V::Int(y)) => Some(x.cmp(y)),
        (V::Uint(x), V::Uint(y)) => Some(x.cmp(y)),
        (V::Int(x), V::Uint(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (V::Uint(x), V::Int(y)) => Some(i128::from(*x).cmp(&i128::from(*y))),
        (V::Double(x), V::Double(y)) => x.partial_cmp(y),
        (V::Double(x), V::Int(y)) => cmp_f64_i128(*x, i128::from(*y)),
        (V::Double(x), V::Uint(y)) => cmp_f64_i128(*x, i128::from(*y)),
        (V::Int(x), V::Double(y)) => cmp_f64_i128(*y, i128::from(*x)).map(Ordering::reverse),
        (V::Uint(x), V::Double(y)) => cmp_f64_i128(*y, i128::from(*x)).map(Ordering::reverse),
        _ => None,
    }
}

fn cmp_f64_i128(x: f64, y: i128) -> Option<Ordering> {
    if x.is_nan() {
        return None;
    }
    // i64/u64 fit in f64's range; compare via f64 unless the value is exact.
    let yf = y as f64;
    match x.partial_cmp(&yf)? {
        Ordering::Equal => {
            // Resolve rounding of large integers exactly.
            if x.fract() == 0.0 && x.abs() < 1.7e38 {
                Some((x as i128).cmp(&y))
            } else {
                Some(Ordering::Equal)
            }
        }
        o => Some(o),
    }
}

impl fmt::Display for EvalValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalValue::String(s) => write!(f, "{s}"),
            EvalValue::Int(i) => write!(f, "{i}"),
            EvalValue::Uint(u) => write!(f, "{u}"),
            EvalValue::Double(d) => write!(f, "{d}"),
            EvalValue::Bool(b) => write!(f, "{b}"),
            EvalValue::Null => write!(f, "null"),
            other => match other.to_json() {
                Some(j) => write!(f, "{j}"),
                None => write!(f, "<{}>", other.type_name()),
            },
        }
    }
}
