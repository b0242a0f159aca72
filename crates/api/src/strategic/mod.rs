//! Strategic merge patch (`application/strategic-merge-patch+json`), as upstream's
//! `apimachinery/pkg/util/strategicpatch` applies it on the server (merging parallel
//! deletion lists, ignoring unmatched nulls), driven by the per-field patch strategy
//! and merge key of [`crate::openapi::field_semantics`]:
//! - maps merge per key, `null` deletes; `patchStrategy: replace` replaces;
//! - lists with `patchStrategy: merge` merge by their merge key (lists of maps) or as
//!   sets (primitives); others are replaced;
//! - directives: `$patch: replace|delete` on a map, `$patch: replace|delete` items in a
//!   merging list, `$retainKeys`, `$setElementOrder/<list>`,
//!   `$deleteFromPrimitiveList/<list>`.
//!
//! Errors carry upstream's wording; [`StrategicError::status_code`] says what to answer.

use serde_json::{Map, Value};

use crate::ssa::schema::{Schemas, TypeRef};

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER: &str = "$setElementOrder";
const DELETE_PRIMITIVE: &str = "$deleteFromPrimitiveList";

/// Why a strategic merge patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrategicError {
    #[error("invalid JSON document")]
    BadJsonDoc,
    #[error("invalid patch format of primitive list")]
    BadPatchFormatForPrimitiveList,
    #[error("invalid patch format of retainKeys")]
    BadPatchFormatForRetainKeys,
    #[error("invalid patch format of setElementOrder list")]
    BadPatchFormatForSetElementOrderList,
    #[error("lists of lists are not supported")]
    NoListOfLists,
    #[error("patch content doesn't match retainKeys list")]
    PatchContentNotMatchRetainKeys,
    /// `map: map[image:x] does not contain declared merge key: name`.
    #[error("map: {map} does not contain declared merge key: {key}")]
    NoMergeKey { map: String, key: String },
    /// `unknown patch type: foo in map: map[$patch:foo]`.
    #[error("unknown patch type: {directive} in map: {map}")]
    BadPatchType { directive: String, map: String },
    /// The kind has no Go struct upstream (custom resources): 415.
    #[error("strategic merge patch format is not supported")]
    Unsupported,
    /// Other upstream errors, worded as upstream.
    #[error("{0}")]
    Other(String),
}

impl StrategicError {
    /// Upstream answers 400 for malformed directives, 422 for lists of lists and
    /// `$retainKeys` mismatches, 415 for types without strategic merge, and 500 for
    /// the rest; Berth answers 400 for a missing merge key and an unknown `$patch`
    /// too, as they are the client's mistakes.
    pub fn status_code(&self) -> u16 {
        match self {
            StrategicError::NoListOfLists | StrategicError::PatchContentNotMatchRetainKeys => 422,
            StrategicError::Unsupported => 415,
            StrategicError::Other(_) => 500,
            _ => 400,
        }
    }
}

type Result<T> = std::result::Result<T, StrategicError>;

/// Applies a strategic merge patch to `doc` (a wire-form object of the kind). On error
/// `doc` is unchanged.
pub fn apply(doc: &mut Value, patch: &Value, group: &str, version: &str, kind: &str) -> Result<()> {
    let Some(schemas) = Schemas::for_group_version(group, version) else {
        return Err(StrategicError::Unsupported);
    };
    let ty = schemas.root(group, version, kind);
    if ty.name().is_none() {
        return Err(StrategicError::Unsupported);
    }
    let (Value::Object(original), Value::Object(p)) = (&*doc, patch) else {
        return Err(StrategicError::BadJsonDoc);
    };
    let merged = merge_map(original.clone(), p.clone(), &ty)?;
    *doc = Value::Object(merged);
    Ok(())
}

/// Go's `%v` of a decoded JSON value (`map[a:1 b:[x y]]`), for upstream's messages.
pub fn go_fmt(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e21 => format!("{f:.0}"),
            Some(f) => format!("{f}"),
            None => n.to_string(),
        },
        Value::String(s) => s.clone(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_fmt).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}:{}", go_fmt(&m[*k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "%!s(<nil>)",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

fn bad_arg_type(expected: &str, actual: &Value) -> StrategicError {
    StrategicError::Other(format!(
        "expected a {expected}, but received a {}",
        go_type(actual)
    ))
}

fn no_merge_key(m: &Map<String, Value>, key: &str) -> StrategicError {
    StrategicError::NoMergeKey {
        map: go_fmt(&Value::Object(m.clone())),
        key: key.to_string(),
    }
}

/// A patch value stored as is: directives and nulls dropped (they mean nothing on a
/// field the original lacks).
fn clean(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                if k == DIRECTIVE
                    || k == RETAIN_KEYS
                    || k.starts_with(SET_ORDER)
                    || k.starts_with(DELETE_PRIMITIVE)
                    || v.is_null()
                {
                    continue;
                }
                out.insert(k.clone(), clean(v));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(
            a.iter()
                .filter(|i| i.get(DIRECTIVE).and_then(Value::as_str) != Some("delete"))
                .map(clean)
                .collect(),
        ),
        v => v.clone(),
    }
}

fn same_type(a: &Value, b: &Value) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    ty: &TypeRef<'_>,
) -> Result<Map<String, Value>> {
    if let Some(d) = patch.get(DIRECTIVE) {
        return match d.as_str() {
            Some("replace") => {
                patch.shift_remove(DIRECTIVE);
                match clean(&Value::Object(patch)) {
                    Value::Object(m) => Ok(m),
                    _ => Ok(Map::new()),
                }
            }
            Some("delete") => Ok(Map::new()),
            _ => Err(StrategicError::BadPatchType {
                directive: go_fmt(d),
                map: go_fmt(&Value::Object(patch.clone())),
            }),
        };
    }
    apply_retain_keys(&mut original, &mut patch)?;
    merge_set_element_order(&mut original, &mut patch, ty)?;

    for (k, pv) in patch {
        let (key, is_delete_list) = match k.strip_prefix(DELETE_PRIMITIVE) {
            Some(rest) => match rest.strip_prefix('/') {
                Some(key) if !key.is_empty() => (key.to_string(), true),
                _ => return Err(StrategicError::BadPatchFormatForPrimitiveList),
            },
            None => (k, false),
        };
        if pv.is_null() {
            original.shift_remove(&key);
            continue;
        }
        let Some(ov) = original.get_mut(&key) else {
            if !is_delete_list {
                original.insert(key, clean(&pv));
            }
            continue;
        };
        if !same_type(ov, &pv) {
            if !is_delete_list {
                *ov = clean(&pv);
            }
            continue;
        }
        let field = ty.field(&key);
        let (_, strategy) = field.patch_strategy();
        match (ov.take(), pv) {
            (Value::Object(om), Value::Object(pm)) => {
                *ov = if strategy == "replace" {
                    clean(&Value::Object(pm))
                } else {
                    Value::Object(merge_map(om, pm, &field)?)
                };
            }
            (Value::Array(ol), Value::Array(pl)) => {
                *ov = Value::Array(merge_slice_handler(
                    ol,
                    pl,
                    &field,
                    strategy,
                    is_delete_list,
                )?);
            }
            (_, pv) => *ov = pv,
        }
    }
    Ok(original)
}

fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
) -> Result<()> {
    let Some(retain) = patch.shift_remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(list) = retain else {
        return Err(StrategicError::BadPatchFormatForRetainKeys);
    };
    for (k, v) in patch.iter() {
        if v.is_null() || k.starts_with(DELETE_PRIMITIVE) || k.starts_with(SET_ORDER) {
            continue;
        }
        if !list.iter().any(|r| r.as_str() == Some(k.as_str())) {
            return Err(StrategicError::PatchContentNotMatchRetainKeys);
        }
    }
    original.retain(|k, _| list.iter().any(|r| r.as_str() == Some(k.as_str())));
    Ok(())
}

fn merge_slice_handler(
    original: Vec<Value>,
    patch: Vec<Value>,
    ty: &TypeRef<'_>,
    strategy: &str,
    is_delete_list: bool,
) -> Result<Vec<Value>> {
    if strategy == "merge" {
        merge_slice(original, patch, ty, ty.patch_merge_key(), is_delete_list)
    } else {
        match clean(&Value::Array(patch)) {
            Value::Array(a) => Ok(a),
            _ => Ok(Vec::new()),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ElemKind {
    Map,
    Other,
}

/// The kind of the elements of the lists: all must share one JSON type, not a list.
fn element_kind(lists: &[&[Value]]) -> Result<Option<ElemKind>> {
    let mut first: Option<&Value> = None;
    for l in lists {
        for v in l.iter() {
            match first {
                None => {
                    if v.is_array() {
                        return Err(StrategicError::NoListOfLists);
                    }
                    first = Some(v);
                }
                Some(f) if !same_type(f, v) => {
                    let all: Vec<String> = lists
                        .iter()
                        .map(|l| go_fmt(&Value::Array(l.to_vec())))
                        .collect();
                    return Err(StrategicError::Other(format!(
                        "list element types are not identical: [{}]",
                        all.join(" ")
                    )));
                }
                Some(_) => {}
            }
        }
    }
    Ok(first.map(|f| {
        if f.is_object() {
            ElemKind::Map
        } else {
            ElemKind::Other
        }
    }))
}

fn merge_slice(
    original: Vec<Value>,
    patch: Vec<Value>,
    ty: &TypeRef<'_>,
    merge_key: &str,
    is_delete_list: bool,
) -> Result<Vec<Value>> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    let Some(kind) = element_kind(&[&original, &patch])? else {
        return Ok(original);
    };
    let elem = ty.elem();
    let (original, patch, merged) = if kind == ElemKind::Other {
        if is_delete_list {
            return Ok(original
                .into_iter()
                .filter(|v| !patch.contains(v))
                .collect());
        }
        let mut both = original.clone();
        both.extend(patch.iter().cloned());
        (original, patch, dedup_scalars(both))
    } else {
        if merge_key.is_empty() {
            return Err(StrategicError::Other(
                "cannot merge lists without merge key for type map".into(),
            ));
        }
        let (original, patch) = merge_special_elements(original, patch, merge_key)?;
        let merged = merge_without_special_elements(original.clone(), &patch, merge_key, &elem)?;
        (original, patch, merged)
    };
    let (patch_items, server_only) = partition(merged, &patch, merge_key, kind)?;
    normalize_element_order(patch_items, server_only, &patch, &original, merge_key, kind)
}

/// Go's in-place deduplication (a duplicate is replaced by the last element).
fn dedup_scalars(mut s: Vec<Value>) -> Vec<Value> {
    let mut length = s.len();
    let mut i = 0;
    while i + 1 < length {
        let mut j = i + 1;
        while j < length {
            if s[i] == s[j] {
                s[j] = s[length - 1].clone();
                length -= 1;
                s.truncate(length);
            } else {
                j += 1;
            }
        }
        i += 1;
    }
    s
}

fn as_map(v: &Value) -> Result<&Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| bad_arg_type("map[string]interface {}", v))
}

fn merge_special_elements(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    merge_key: &str,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut rest = Vec::with_capacity(patch.len());
    let mut replace = false;
    for v in patch {
        let m = as_map(&v)?;
        let Some(d) = m.get(DIRECTIVE) else {
            rest.push(v);
            continue;
        };
        match d.as_str() {
            Some("delete") => {
                let Some(key_value) = m.get(merge_key) else {
                    return Err(no_merge_key(m, merge_key));
                };
                let mut kept = Vec::with_capacity(original.len());
                for o in original {
                    if as_map(&o)?.get(merge_key) != Some(key_value) {
                        kept.push(o);
                    }
                }
                original = kept;
            }
            Some("replace") => replace = true,
            Some("merge") => {
                return Err(StrategicError::Other(
                    "merging lists cannot yet be specified in the patch".into(),
                ));
            }
            _ => {
                return Err(StrategicError::BadPatchType {
                    directive: go_fmt(d),
                    map: go_fmt(&v),
                });
            }
        }
    }
    if replace {
        let cleaned = rest.iter().map(clean).collect();
        return Ok((cleaned, Vec::new()));
    }
    Ok((original, rest))
}

fn find_by_key(list: &[Value], key: &str, value: &Value) -> Result<Option<usize>> {
    for (i, v) in list.iter().enumerate() {
        let Some(m) = v.as_object() else {
            return Err(StrategicError::Other(format!(
                "value for key {i} is not a map."
            )));
        };
        if m.get(key) == Some(value) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

fn merge_without_special_elements(
    mut original: Vec<Value>,
    patch: &[Value],
    merge_key: &str,
    elem: &TypeRef<'_>,
) -> Result<Vec<Value>> {
    for v in patch {
        let m = as_map(v)?;
        let Some(key_value) = m.get(merge_key) else {
            return Err(no_merge_key(m, merge_key));
        };
        match find_by_key(&original, merge_key, key_value)? {
            Some(i) => {
                let o = match original[i].take() {
                    Value::Object(o) => o,
                    _ => Map::new(),
                };
                original[i] = Value::Object(merge_map(o, m.clone(), elem)?);
            }
            None => original.push(clean(v)),
        }
    }
    Ok(original)
}

/// Splits `merged` into the items named in `by` and the others (server-only).
fn partition(
    merged: Vec<Value>,
    by: &[Value],
    merge_key: &str,
    kind: ElemKind,
) -> Result<(Vec<Value>, Vec<Value>)> {
    let mut in_patch = Vec::new();
    let mut server_only = Vec::new();
    for v in merged {
        let found = if kind == ElemKind::Map && !merge_key.is_empty() {
            let m = as_map(&v)?;
            let Some(key_value) = m.get(merge_key) else {
                return Err(no_merge_key(m, merge_key));
            };
            find_by_key(by, merge_key, key_value)?.is_some()
        } else {
            by.contains(&v)
        };
        if found {
            in_patch.push(v);
        } else {
            server_only.push(v);
        }
    }
    Ok((in_patch, server_only))
}

/// Position of `v` in `order`: by merge key for maps, by value otherwise.
fn index_of(order: &[Value], v: &Value, merge_key: &str, kind: ElemKind) -> Option<usize> {
    match kind {
        ElemKind::Map => {
            let key = v.get(merge_key);
            order.iter().position(|o| o.get(merge_key) == key)
        }
        ElemKind::Other => order.iter().position(|o| o == v),
    }
}

fn normalize_slice_order(
    to_sort: Vec<Value>,
    order: &[Value],
    merge_key: &str,
    kind: ElemKind,
) -> Result<Vec<Value>> {
    let (mut to_sort, to_delete) = if kind == ElemKind::Map {
        for v in to_sort.iter().chain(order) {
            let m = as_map(v)?;
            if !m.contains_key(merge_key) {
                return Err(no_merge_key(m, merge_key));
            }
        }
        to_sort.into_iter().partition::<Vec<Value>, _>(|v| {
            v.get(DIRECTIVE).and_then(Value::as_str) != Some("delete")
        })
    } else {
        (to_sort, Vec::new())
    };
    // Go's stable insertion sort with upstream's `less` (an item missing from `order`
    // compares as less), so results match upstream's even for such items.
    let less = |a: &Value, b: &Value| match (
        index_of(order, a, merge_key, kind),
        index_of(order, b, merge_key, kind),
    ) {
        (Some(i), Some(j)) => i < j,
        _ => true,
    };
    for i in 1..to_sort.len() {
        let mut j = i;
        while j > 0 && less(&to_sort[j], &to_sort[j - 1]) {
            to_sort.swap(j, j - 1);
            j -= 1;
        }
    }
    to_sort.extend(to_delete);
    Ok(to_sort)
}

fn normalize_element_order(
    patch: Vec<Value>,
    server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    merge_key: &str,
    kind: ElemKind,
) -> Result<Vec<Value>> {
    let patch = normalize_slice_order(patch, patch_order, merge_key, kind)?;
    let server_only = normalize_slice_order(server_only, server_order, merge_key, kind)?;
    // Interleave: a server-only item goes before a patch item when the live order
    // puts it first.
    let mut out = Vec::with_capacity(patch.len() + server_only.len());
    let (mut i, mut j) = (0, 0);
    while i < server_only.len() || j < patch.len() {
        if i >= server_only.len() {
            out.push(patch[j].clone());
            j += 1;
        } else if j >= patch.len() {
            out.push(server_only[i].clone());
            i += 1;
        } else {
            let li = index_of(server_order, &server_only[i], merge_key, kind);
            let ri = index_of(server_order, &patch[j], merge_key, kind);
            if matches!((li, ri), (Some(l), Some(r)) if l < r) {
                out.push(server_only[i].clone());
                i += 1;
            } else {
                out.push(patch[j].clone());
                j += 1;
            }
        }
    }
    Ok(out)
}

/// Checks that the patch list's items (deletions aside) appear in the
/// `$setElementOrder` list in the same relative order.
fn validate_with_order(patch_list: &[Value], order: &[Value], merge_key: &str) -> Result<()> {
    if order.is_empty() || patch_list.is_empty() {
        return Ok(());
    }
    let non_delete: Vec<&Value> = if merge_key.is_empty() {
        patch_list.iter().collect()
    } else {
        let mut v = Vec::new();
        for item in patch_list {
            as_map(item)?;
            if item.get(DIRECTIVE).and_then(Value::as_str) != Some("delete") {
                v.push(item);
            }
        }
        v
    };
    let key_equal = |a: &Value, b: &Value| -> Result<bool> {
        if merge_key.is_empty() {
            return Ok(a == b);
        }
        let (am, bm) = (as_map(a)?, as_map(b)?);
        let ka = am
            .get(merge_key)
            .ok_or_else(|| no_merge_key(am, merge_key))?;
        let kb = bm
            .get(merge_key)
            .ok_or_else(|| no_merge_key(bm, merge_key))?;
        Ok(ka == kb)
    };
    let (mut pi, mut oi) = (0, 0);
    while pi < non_delete.len() && oi < order.len() {
        if non_delete[pi].get(DIRECTIVE).is_some() {
            pi += 1;
            continue;
        }
        if key_equal(non_delete[pi], &order[oi])? {
            pi += 1;
        }
        oi += 1;
    }
    if pi < non_delete.len() && oi >= order.len() {
        return Err(StrategicError::Other(format!(
            "The order in patch list:\n{}\n doesn't match {SET_ORDER} list:\n{}\n",
            go_fmt(&Value::Array(patch_list.to_vec())),
            go_fmt(&Value::Array(order.to_vec()))
        )));
    }
    Ok(())
}

/// The live list as upstream's `$setElementOrder` handling sees it once the list has
/// been merged: upstream deletes (`$patch: delete`) and appends new items in place in
/// the live list's backing array, which the final ordering then reads as the server
/// order (its own suite's results depend on it, e.g. "add map and delete map from
/// merging list"). Deleting shifts later items left (the last slot keeps its old
/// value); appending writes into the slots a deletion freed.
fn aliased_server_order(original: &[Value], patch: &[Value], merge_key: &str) -> Vec<Value> {
    let mut backing = original.to_vec();
    let cap = backing.len();
    let mut len = cap;
    let key_of = |v: &Value| v.get(merge_key).cloned();
    let mut replace = false;
    let mut rest = Vec::new();
    for item in patch {
        match item.get(DIRECTIVE).and_then(Value::as_str) {
            Some("delete") => {
                let Some(key) = key_of(item) else { continue };
                while let Some(k) = backing[..len]
                    .iter()
                    .position(|o| key_of(o).as_ref() == Some(&key))
                {
                    for i in k..len - 1 {
                        backing[i] = backing[i + 1].clone();
                    }
                    len -= 1;
                }
            }
            Some("replace") => replace = true,
            Some(_) => {}
            None => rest.push(item),
        }
    }
    if !replace {
        for item in rest {
            let key = key_of(item);
            if backing[..len.min(cap)].iter().any(|o| key_of(o) == key) {
                continue;
            }
            if len < cap {
                backing[len] = item.clone();
            }
            len += 1;
        }
    }
    backing
}

fn merge_set_element_order(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    ty: &TypeRef<'_>,
) -> Result<()> {
    let keys: Vec<String> = patch
        .keys()
        .filter(|k| k.starts_with(SET_ORDER))
        .cloned()
        .collect();
    for key in keys {
        let Some(order) = patch.shift_remove(&key) else {
            continue;
        };
        let Value::Array(order) = order else {
            return Err(bad_arg_type("[]interface {}", &order));
        };
        let field_name = match key
            .strip_prefix(SET_ORDER)
            .and_then(|r| r.strip_prefix('/'))
        {
            Some(f) if !f.is_empty() => f.to_string(),
            _ => return Err(StrategicError::BadPatchFormatForSetElementOrderList),
        };
        let original_list = match original.get(&field_name) {
            None => None,
            Some(Value::Array(a)) => Some(a.clone()),
            Some(other) => return Err(bad_arg_type("[]interface {}", other)),
        };
        let patch_list = match patch.get(&field_name) {
            None => None,
            Some(Value::Array(a)) => Some(a.clone()),
            Some(other) => return Err(bad_arg_type("[]interface {}", other)),
        };
        let field = ty.field(&field_name);
        let (_, strategy) = field.patch_strategy();
        let merge_key = field.patch_merge_key();
        validate_with_order(patch_list.as_deref().unwrap_or(&[]), &order, merge_key)?;
        let merged = match (&original_list, &patch_list) {
            (Some(o), None) => o.clone(),
            (None, Some(p)) => match clean(&Value::Array(p.clone())) {
                Value::Array(a) => a,
                _ => Vec::new(),
            },
            (Some(o), Some(p)) => {
                merge_slice_handler(o.clone(), p.clone(), &field, strategy, false)?
            }
            (None, None) => continue,
        };
        let orig = original_list.unwrap_or_default();
        let Some(kind) = element_kind(&[&orig, patch_list.as_deref().unwrap_or(&[])])? else {
            original.insert(field_name.clone(), Value::Array(merged));
            patch.shift_remove(&field_name);
            continue;
        };
        let (patch_items, server_only) = partition(merged, &order, merge_key, kind)?;
        let server_order = match &patch_list {
            Some(p) if kind == ElemKind::Map && strategy == "merge" && !merge_key.is_empty() => {
                aliased_server_order(&orig, p, merge_key)
            }
            _ => orig.clone(),
        };
        let both = normalize_element_order(
            patch_items,
            server_only,
            &order,
            &server_order,
            merge_key,
            kind,
        )?;
        original.insert(field_name.clone(), Value::Array(both));
        patch.shift_remove(&field_name);
    }
    Ok(())
}

#[cfg(test)]
mod cases;
#[cfg(test)]
mod tests;
