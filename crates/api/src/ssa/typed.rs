//! Objects walked with their type: the field set a value owns, the merge of an applied
//! configuration into a live object, removal of a set of fields, and which leaves two
//! values disagree on (structured-merge-diff's `typed` package).

use serde_json::{Map, Value};

use super::fieldpath::{FieldSet, PathElement};
use super::schema::{ListKind, Shape, TypeRef};

/// A malformed value for its schema (e.g. a map list item without its key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct TypeError {
    pub path: String,
    pub message: String,
}

fn err(path: &[PathElement], message: impl Into<String>) -> TypeError {
    TypeError {
        path: super::fieldpath::Path(path.to_vec()).to_string(),
        message: message.into(),
    }
}

/// Upstream fills list-map keys the schema defaults (container and service ports'
/// `protocol`); these are the defaulted keys of the served types.
fn key_default(key: &str) -> Option<Value> {
    (key == "protocol").then(|| Value::String("TCP".into()))
}

/// How a value of this type behaves, with untyped values deduced from the value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Leaf,
    Struct,
    Map,
    List(ListKind),
}

fn kind_of(ty: &TypeRef<'_>, v: &Value) -> Kind {
    match ty.shape() {
        Shape::Struct | Shape::Map if ty.is_atomic_map() => Kind::Leaf,
        Shape::Struct => Kind::Struct,
        Shape::Map => Kind::Map,
        Shape::List => match ty.list_kind() {
            ListKind::Atomic => Kind::Leaf,
            k => Kind::List(k),
        },
        Shape::Scalar => Kind::Leaf,
        Shape::Untyped => match v {
            Value::Object(_) => Kind::Map,
            _ => Kind::Leaf,
        },
    }
}

/// The path element identifying a list item.
pub fn item_element(kind: &ListKind, index: usize, item: &Value) -> Result<PathElement, String> {
    match kind {
        ListKind::Atomic => Ok(PathElement::Index(index)),
        ListKind::Set => match item {
            Value::Object(_) => {
                Err("associative list without keys has an element that's a map type".into())
            }
            Value::Array(_) => Err("not supported: associative list with lists as elements".into()),
            Value::Null => {
                Err("associative list without keys has an element that's an explicit null".into())
            }
            v => Ok(PathElement::Value(v.clone())),
        },
        ListKind::Map(keys) => {
            let Value::Object(m) = item else {
                return Err(if item.is_null() {
                    "associative list with keys may not have a null element".into()
                } else {
                    "associative list with keys may not have non-map elements".into()
                });
            };
            let mut fields = Vec::with_capacity(keys.len());
            for k in keys {
                match m.get(*k).cloned().or_else(|| key_default(k)) {
                    Some(v) => fields.push(((*k).to_string(), v)),
                    None => {
                        return Err(format!(
                            "associative list with keys has an element that omits key field {k:?} (and doesn't have default value)"
                        ));
                    }
                }
            }
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(PathElement::Key(fields))
        }
    }
}

fn index_items(
    kind: &ListKind,
    items: &[Value],
    path: &[PathElement],
) -> Result<Vec<PathElement>, TypeError> {
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let pe = item_element(kind, i, item).map_err(|m| err(path, m))?;
        if out.contains(&pe) {
            let mut p = path.to_vec();
            p.push(pe.clone());
            return Err(err(&p, "duplicate entries for key"));
        }
        out.push(pe);
    }
    Ok(out)
}

/// The fields a value sets (upstream's `ToFieldSet`): leaves, list items, map entries,
/// and struct fields whose value is null or an empty object.
pub fn fields_of(v: &Value, ty: &TypeRef<'_>) -> Result<FieldSet, TypeError> {
    let mut out = FieldSet::new();
    walk_fields(v, ty, &mut Vec::new(), &mut out)?;
    Ok(out)
}

fn walk_fields(
    v: &Value,
    ty: &TypeRef<'_>,
    path: &mut Vec<PathElement>,
    out: &mut FieldSet,
) -> Result<(), TypeError> {
    match kind_of(ty, v) {
        Kind::Leaf => out.insert(path),
        Kind::Struct | Kind::Map => {
            let Value::Object(m) = v else {
                // null (or a wrong type) owns the field itself.
                out.insert(path);
                return Ok(());
            };
            let is_struct = ty.shape() == Shape::Struct;
            for (k, child) in m {
                let child_ty = ty.field(k);
                path.push(PathElement::Field(k.clone()));
                walk_fields(child, &child_ty, path, out)?;
                let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                if !is_struct || empty {
                    out.insert(path);
                }
                path.pop();
            }
        }
        Kind::List(kind) => {
            let Value::Array(items) = v else {
                out.insert(path);
                return Ok(());
            };
            let elem = ty.elem();
            let pes = index_items(&kind, items, path)?;
            for (pe, item) in pes.into_iter().zip(items) {
                path.push(pe);
                walk_fields(item, &elem, path, out)?;
                out.insert(path);
                path.pop();
            }
        }
    }
    Ok(())
}

/// Merges an applied configuration into a live value: applied values win, maps and
/// structs merge per key unless atomic, associative lists merge per item (shared items
/// in the applied order, live-only items kept where they were).
pub fn merge(live: Option<&Value>, applied: &Value, ty: &TypeRef<'_>) -> Result<Value, TypeError> {
    merge_at(live, applied, ty, &mut Vec::new())
}

fn merge_at(
    live: Option<&Value>,
    applied: &Value,
    ty: &TypeRef<'_>,
    path: &mut Vec<PathElement>,
) -> Result<Value, TypeError> {
    let Some(live) = live else {
        return Ok(applied.clone());
    };
    match (kind_of(ty, applied), live, applied) {
        (Kind::Struct | Kind::Map, Value::Object(l), Value::Object(a)) => {
            let mut out = l.clone();
            for (k, av) in a {
                path.push(PathElement::Field(k.clone()));
                let merged = merge_at(l.get(k), av, &ty.field(k), path)?;
                path.pop();
                out.insert(k.clone(), merged);
            }
            Ok(Value::Object(out))
        }
        (Kind::List(kind), Value::Array(l), Value::Array(a)) => {
            merge_list(&kind, l, a, ty, path).map(Value::Array)
        }
        _ => Ok(applied.clone()),
    }
}

fn merge_list(
    kind: &ListKind,
    live: &[Value],
    applied: &[Value],
    ty: &TypeRef<'_>,
    path: &mut Vec<PathElement>,
) -> Result<Vec<Value>, TypeError> {
    let elem = ty.elem();
    let lpes = index_items(kind, live, path)?;
    let apes = index_items(kind, applied, path)?;
    let in_live = |pe: &PathElement| lpes.iter().position(|p| p == pe);
    let in_applied = |pe: &PathElement| apes.iter().position(|p| p == pe);
    // Items in both, in the applied order; they are emitted in that order while
    // live-only items keep their place between them.
    let shared: Vec<usize> = (0..apes.len())
        .filter(|&i| in_live(&apes[i]).is_some())
        .collect();
    let mut next_shared = 0;
    let mut merged = vec![false; apes.len()];
    let mut out = Vec::with_capacity(live.len() + applied.len());
    let (mut li, mut ai) = (0, 0);
    let merge_item = |ai: usize, path: &mut Vec<PathElement>| -> Result<Value, TypeError> {
        path.push(apes[ai].clone());
        let l = in_live(&apes[ai]).map(|i| &live[i]);
        let r = merge_at(l, &applied[ai], &elem, path);
        path.pop();
        r
    };
    while li < lpes.len() || ai < apes.len() {
        if li < lpes.len() && ai < apes.len() {
            if lpes[li] == apes[ai] {
                out.push(merge_item(ai, path)?);
                merged[ai] = true;
                if shared.get(next_shared) == Some(&ai) {
                    next_shared += 1;
                }
                li += 1;
                ai += 1;
                continue;
            }
            if let Some(j) = in_applied(&lpes[li])
                && shared.get(next_shared).is_some_and(|&n| n != j)
            {
                // A shared item whose turn has not come: the applied side emits it.
                li += 1;
                continue;
            }
        }
        if li < lpes.len() {
            match in_applied(&lpes[li]) {
                None => {
                    out.push(live[li].clone());
                    li += 1;
                    continue;
                }
                Some(j) if merged[j] => {
                    li += 1;
                    continue;
                }
                Some(_) => {}
            }
        }
        if ai < apes.len() {
            out.push(merge_item(ai, path)?);
            merged[ai] = true;
            if shared.get(next_shared) == Some(&ai) {
                next_shared += 1;
            }
            ai += 1;
        }
    }
    Ok(out)
}

/// Removes the fields of `set` from a value: a member is removed whole (a field, map
/// entry or list item), children are descended into.
pub fn remove(v: &mut Value, set: &FieldSet, ty: &TypeRef<'_>) -> Result<(), TypeError> {
    remove_at(v, set, ty, &mut Vec::new())
}

fn remove_at(
    v: &mut Value,
    set: &FieldSet,
    ty: &TypeRef<'_>,
    path: &mut Vec<PathElement>,
) -> Result<(), TypeError> {
    if set.is_empty() {
        return Ok(());
    }
    let kind = kind_of(ty, v);
    match (kind, v) {
        (Kind::Struct | Kind::Map, Value::Object(m)) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let pe = PathElement::Field(k.clone());
                if set.has_member(&pe) {
                    m.shift_remove(&k);
                } else if let (Some(sub), Some(child)) = (set.child(&pe), m.get_mut(&k)) {
                    path.push(pe);
                    remove_at(child, sub, &ty.field(&k), path)?;
                    path.pop();
                }
            }
        }
        (Kind::List(kind), Value::Array(items)) => {
            let pes = index_items(&kind, items, path)?;
            let elem = ty.elem();
            let mut kept = Vec::with_capacity(items.len());
            for (pe, mut item) in pes.into_iter().zip(std::mem::take(items)) {
                if set.has_member(&pe) {
                    continue;
                }
                if let Some(sub) = set.child(&pe) {
                    path.push(pe);
                    remove_at(&mut item, sub, &elem, path)?;
                    path.pop();
                }
                kept.push(item);
            }
            *items = kept;
        }
        _ => {}
    }
    Ok(())
}

/// The leaves (scalars, atomic values) present in both values with different values.
pub fn modified(old: &Value, new: &Value, ty: &TypeRef<'_>) -> Result<FieldSet, TypeError> {
    let mut out = FieldSet::new();
    modified_at(old, new, ty, &mut Vec::new(), &mut out)?;
    Ok(out)
}

fn modified_at(
    old: &Value,
    new: &Value,
    ty: &TypeRef<'_>,
    path: &mut Vec<PathElement>,
    out: &mut FieldSet,
) -> Result<(), TypeError> {
    match (kind_of(ty, new), old, new) {
        (Kind::Struct | Kind::Map, Value::Object(o), Value::Object(n)) => {
            for (k, nv) in n {
                if let Some(ov) = o.get(k) {
                    path.push(PathElement::Field(k.clone()));
                    modified_at(ov, nv, &ty.field(k), path, out)?;
                    path.pop();
                }
            }
        }
        (Kind::List(kind), Value::Array(o), Value::Array(n)) => {
            let opes = index_items(&kind, o, path)?;
            let npes = index_items(&kind, n, path)?;
            let elem = ty.elem();
            for (pe, nv) in npes.into_iter().zip(n) {
                if let Some(i) = opes.iter().position(|p| *p == pe) {
                    path.push(pe);
                    modified_at(&o[i], nv, &elem, path, out)?;
                    path.pop();
                }
            }
        }
        (_, o, n) => {
            if o != n && !path.is_empty() {
                out.insert(path);
            }
        }
    }
    Ok(())
}

/// Added, removed and modified fields from `old` to `new`.
#[derive(Debug, Default, Clone)]
pub struct Comparison {
    pub added: FieldSet,
    pub removed: FieldSet,
    pub modified: FieldSet,
}

pub fn compare(old: &Value, new: &Value, ty: &TypeRef<'_>) -> Result<Comparison, TypeError> {
    let fo = fields_of(old, ty)?;
    let fnew = fields_of(new, ty)?;
    let mut added = fnew.difference(&fo);
    added_nodes(Some(old), new, ty, &mut Vec::new(), &mut added);
    let mut removed = fo.difference(&fnew);
    added_nodes(Some(new), old, ty, &mut Vec::new(), &mut removed);
    Ok(Comparison {
        added,
        removed,
        modified: modified(old, new, ty)?,
    })
}

/// Struct fields upstream's Go types hold by value: they always exist (as `{}`) in the
/// objects upstream compares, so their appearance is never an addition.
const VALUE_STRUCTS: &[&str] = &[
    "metadata",
    "spec",
    "status",
    "template",
    "strategy",
    "updateStrategy",
    "resources",
    "jobTemplate",
];

/// Upstream's comparison reports an object-valued field (a map, or a struct held by
/// pointer) that appears as added itself, besides its leaves (`".": {}` in FieldsV1).
fn added_nodes(
    old: Option<&Value>,
    new: &Value,
    ty: &TypeRef<'_>,
    path: &mut Vec<PathElement>,
    out: &mut FieldSet,
) {
    match (kind_of(ty, new), new) {
        (Kind::Struct | Kind::Map, Value::Object(m)) => {
            let is_struct = ty.shape() == Shape::Struct;
            let old_m = old.and_then(Value::as_object);
            for (k, child) in m {
                let child_ty = ty.field(k);
                let old_child = old_m.and_then(|o| o.get(k));
                path.push(PathElement::Field(k.clone()));
                if old_child.is_none()
                    && child.is_object()
                    && !(is_struct && VALUE_STRUCTS.contains(&k.as_str()))
                    && matches!(kind_of(&child_ty, child), Kind::Struct | Kind::Map)
                {
                    out.insert(path);
                }
                added_nodes(old_child, child, &child_ty, path, out);
                path.pop();
            }
        }
        (Kind::List(kind), Value::Array(items)) => {
            let elem = ty.elem();
            let old_items = old.and_then(Value::as_array);
            for (i, item) in items.iter().enumerate() {
                let Ok(pe) = item_element(&kind, i, item) else {
                    continue;
                };
                let old_item = old_items.and_then(|o| {
                    o.iter()
                        .enumerate()
                        .find(|(j, v)| item_element(&kind, *j, v).is_ok_and(|p| p == pe))
                        .map(|(_, v)| v)
                });
                path.push(pe);
                added_nodes(old_item, item, &elem, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}
