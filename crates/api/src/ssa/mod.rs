//! Server-side apply and `metadata.managedFields` (upstream's structured-merge-diff plus
//! apiserver's `managedfields`), as pure functions over wire-form objects.
//!
//! The server calls, per write (objects without `resourceVersion` concerns; `now` is
//! RFC 3339 seconds, e.g. `2024-05-01T10:00:00Z`):
//! - apply (`PATCH` `application/apply-patch+yaml`): [`apply`] with the live object
//!   (`None` to create) and the decoded patch; it returns the object to store, with
//!   managedFields, or [`SsaError::Conflicts`] (409).
//! - create, update, and every other patch: [`update_managed_fields`] with the old
//!   object (`None` on create) and the new one, after the write's own changes, before
//!   validation and storage.
//! - status (or another subresource) writes: the same, with `subresource: Some("status")`
//!   in the [`Request`]; the entry carries `subresource` and the client's managedFields
//!   are ignored.
//!
//! Both take the fields the endpoint resets as [`Request::ignored`] (see
//! [`reset_fields`]): nobody takes ownership of them there.

pub mod fieldpath;
pub mod managed;
pub mod schema;
pub mod typed;

use serde_json::{Map, Value, json};

use fieldpath::{FieldSet, Path, PathElement};
use managed::{Entry, Managed, ManagerId};
use schema::{Schemas, TypeRef};

pub(crate) const APPLY: &str = "Apply";
pub(crate) const UPDATE: &str = "Update";

/// Upstream's `DefaultMaxUpdateManagers`.
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// kubectl's client-side apply annotation.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// One write, as the field manager sees it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// `fieldManager`, or [`manager_from_user_agent`] for non-apply writes.
    pub manager: &'a str,
    /// The apiVersion of the request (`apps/v1`): the version entries are written in.
    pub api_version: &'a str,
    /// RFC 3339 time of the write.
    pub now: &'a str,
    /// `Some("status")` for writes to a subresource.
    pub subresource: Option<&'a str>,
    /// Paths (field names from the root) the endpoint resets: see [`reset_fields`].
    pub ignored: &'a [Path],
}

/// The fields an endpoint resets, so that no manager owns them through it (upstream's
/// `GetResetFields`): the main endpoint of a kind with a status subresource ignores
/// `status`; the status subresource ignores `spec`.
pub fn reset_fields(has_status_subresource: bool, subresource: Option<&str>) -> Vec<Path> {
    match subresource {
        None if has_status_subresource => vec![Path::fields(&["status"])],
        Some("status") => vec![Path::fields(&["spec"])],
        _ => Vec::new(),
    }
}

/// A field another manager owns with a different value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub manager: ManagerId,
    pub path: Path,
}

/// An apply's conflicts; renders upstream's 409 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflicts(pub Vec<Conflict>);

impl std::fmt::Display for Conflicts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let [c] = self.0.as_slice() {
            return write!(
                f,
                "Apply failed with 1 conflict: conflict with {}: {}",
                c.manager.describe(),
                c.path
            );
        }
        // Grouped by manager, managers sorted by their identifier as upstream does.
        let mut managers: Vec<&ManagerId> = Vec::new();
        for c in &self.0 {
            if !managers.contains(&&c.manager) {
                managers.push(&c.manager);
            }
        }
        managers.sort_by_key(|m| m.identifier());
        let mut lines = Vec::new();
        for m in managers {
            lines.push(format!("conflicts with {}:", m.describe()));
            for c in self.0.iter().filter(|c| &c.manager == m) {
                lines.push(format!("- {}", c.path));
            }
        }
        write!(
            f,
            "Apply failed with {} conflicts: {}",
            self.0.len(),
            lines.join("\n")
        )
    }
}

impl Conflicts {
    /// The `details.causes` of the 409 Status.
    pub fn causes(&self) -> Value {
        Value::Array(
            self.0
                .iter()
                .map(|c| {
                    json!({
                        "reason": "FieldManagerConflict",
                        "message": format!("conflict with {}", c.manager.describe()),
                        "field": c.path.to_string(),
                    })
                })
                .collect(),
        )
    }
}

/// Why an apply or managedFields update failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SsaError {
    /// 409 Conflict, reason `Conflict`, with [`Conflicts::causes`].
    #[error("{0}")]
    Conflicts(Conflicts),
    /// 400 Bad Request.
    #[error("{0}")]
    BadRequest(String),
    /// The stored managedFields cannot be decoded (upstream: 500).
    #[error("failed to decode managed fields: {0}")]
    ManagedFields(String),
}

impl SsaError {
    /// The HTTP status the server answers with.
    pub fn status_code(&self) -> u16 {
        match self {
            SsaError::Conflicts(_) => 409,
            SsaError::BadRequest(_) => 400,
            SsaError::ManagedFields(_) => 500,
        }
    }
}

/// The manager name of a write without `fieldManager`: the user agent up to its first
/// `/`, without unprintable characters, at most 128 bytes (upstream's
/// `prefixFromUserAgent`): `kubectl/v1.33.9 (linux/amd64) …` → `kubectl`.
pub fn manager_from_user_agent(ua: &str) -> String {
    let prefix = ua.split('/').next().unwrap_or_default();
    let mut out = String::new();
    for c in prefix.chars() {
        if c.is_control() || (c.is_whitespace() && c != ' ') {
            continue;
        }
        if out.len() + c.len_utf8() > 128 {
            break;
        }
        out.push(c);
    }
    out
}

fn gvk_of(obj: &Value, fallback_api_version: &str) -> (String, String, String) {
    let api_version = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or(fallback_api_version);
    let (g, v) = crate::registry::split_api_version(api_version);
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    (g.to_string(), v.to_string(), kind.to_string())
}

fn without_managed_fields(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(Value::Object(meta)) = v.get_mut("metadata") {
        meta.shift_remove("managedFields");
    }
    v
}

/// Fields no manager owns (upstream's `stripMeta`): identity and server-set metadata.
fn strip_meta(set: &FieldSet) -> FieldSet {
    let mut strip = FieldSet::new();
    strip.insert(&[PathElement::Field("apiVersion".into())]);
    strip.insert(&[PathElement::Field("kind".into())]);
    strip.insert(&[PathElement::Field("metadata".into())]);
    for f in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        strip.insert(&[
            PathElement::Field("metadata".into()),
            PathElement::Field(f.into()),
        ]);
    }
    set.difference(&strip)
}

/// The fields an applied configuration declares (what its manager will own), without
/// identity metadata.
pub fn fields_of(obj: &Value, ty: &TypeRef<'_>) -> Result<FieldSet, typed::TypeError> {
    typed::fields_of(obj, ty).map(|s| strip_meta(&s))
}

/// Schemas of the object's group-version, and a root view over them.
fn with_type<R>(group: &str, version: &str, kind: &str, f: impl FnOnce(&TypeRef<'_>) -> R) -> R {
    match Schemas::for_group_version(group, version) {
        Some(s) => f(&s.root(group, version, kind)),
        None => f(&TypeRef::untyped()),
    }
}

fn gvk_string(group: &str, version: &str, kind: &str) -> String {
    format!("{group}/{version}, Kind={kind}")
}

/// Server-side apply of `applied` (the decoded patch body) to `live` (`None`: the object
/// does not exist and apply creates it). Returns the object to store, with
/// `metadata.managedFields` updated.
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    req: &Request<'_>,
    force: bool,
) -> Result<Value, SsaError> {
    if !applied.is_object() {
        return Err(SsaError::BadRequest(
            "apply patch must be an object".to_string(),
        ));
    }
    if applied
        .pointer("/metadata/managedFields")
        .is_some_and(|v| !v.is_null())
    {
        return Err(SsaError::BadRequest(
            "metadata.managedFields must be nil".to_string(),
        ));
    }
    let patch_version = applied
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if patch_version != req.api_version {
        return Err(SsaError::BadRequest(format!(
            "Incorrect version specified in apply patch. Specified patch version: {patch_version}, expected: {}",
            req.api_version
        )));
    }
    let (g, v, k) = gvk_of(applied, req.api_version);
    with_type(&g, &v, &k, |ty| {
        let result = apply_typed(live, applied, req, force, ty, &g, &v, &k);
        // kubectl's server-side apply keeps an existing client-side apply annotation
        // in step (upstream's lastAppliedManager): conflicts only with values the
        // last client-side apply set are forced.
        match result {
            Err(SsaError::Conflicts(c)) if req.manager == "kubectl" && !force => {
                let allowed = live
                    .map(|l| allowed_by_last_applied(l, ty))
                    .unwrap_or_default();
                let remaining: Vec<Conflict> =
                    c.0.iter()
                        .filter(|c| !allowed.has(&c.path.0))
                        .cloned()
                        .collect();
                if remaining.is_empty() {
                    apply_typed(live, applied, req, true, ty, &g, &v, &k)
                } else {
                    Err(SsaError::Conflicts(Conflicts(remaining)))
                }
            }
            r => r,
        }
        .map(|mut obj| {
            if req.manager == "kubectl" {
                sync_last_applied(&mut obj, applied);
            }
            obj
        })
    })
}

#[allow(clippy::too_many_arguments)]
fn apply_typed(
    live: Option<&Value>,
    applied: &Value,
    req: &Request<'_>,
    force: bool,
    ty: &TypeRef<'_>,
    g: &str,
    v: &str,
    k: &str,
) -> Result<Value, SsaError> {
    let mut managed = match live {
        Some(l) => Managed::decode(l)?,
        None => Managed::default(),
    };
    let live_v = live
        .map(without_managed_fields)
        .unwrap_or_else(|| json!({}));
    let applied_v = without_managed_fields(applied);
    let config_set = typed::fields_of(&applied_v, ty)
        .map_err(|e| {
            SsaError::BadRequest(format!(
                "failed to create typed patch object ({}): {e}",
                gvk_string(g, v, k)
            ))
        })?
        .without_prefixes(req.ignored);
    let config_set = strip_meta(&config_set);
    let live_err = |e: typed::TypeError| {
        SsaError::BadRequest(format!(
            "failed to create typed live object ({}): {e}",
            gvk_string(g, v, k)
        ))
    };
    let typed_err = |e: typed::TypeError| SsaError::BadRequest(e.to_string());
    let mut merged = typed::merge(Some(&live_v), &applied_v, ty).map_err(live_err)?;

    let id = ManagerId::new(
        req.manager,
        APPLY,
        req.api_version,
        req.subresource.unwrap_or(""),
    );
    let previous = managed.get(&id).cloned();

    // Prune what this manager applied before and no longer declares, unless another
    // manager owns it.
    if let Some(prev) = &previous {
        let mut owned = config_set.clone();
        for e in managed.entries.iter().filter(|e| e.id != id) {
            owned = owned.union(&e.set);
        }
        let remove = prev
            .set
            .with_named_fields_as_members()
            .difference(&owned.with_named_fields_as_members());
        typed::remove(&mut merged, &remove, ty).map_err(typed_err)?;
    }

    // Ownership: other managers lose what changed under them; a changed field they
    // own is a conflict unless forced.
    let cmp = typed::compare(&live_v, &merged, ty).map_err(typed_err)?;
    let changed = cmp.modified.union(&cmp.added).without_prefixes(req.ignored);
    let mut conflicts = Vec::new();
    for e in managed.entries.iter().filter(|e| e.id != id) {
        for path in e.set.intersection(&changed).paths() {
            conflicts.push(Conflict {
                manager: e.id.clone(),
                path,
            });
        }
    }
    if !conflicts.is_empty() && !force {
        conflicts.sort_by_key(|c| c.manager.identifier());
        return Err(SsaError::Conflicts(Conflicts(conflicts)));
    }
    for e in managed.entries.iter_mut().filter(|e| e.id != id) {
        e.set = e.set.difference(&changed).difference(&cmp.removed);
    }

    let object_changed = live_v != merged;
    let time = match &previous {
        Some(p) if !object_changed && p.set == config_set => p.time.clone(),
        _ => Some(req.now.to_string()),
    };
    managed.put(Entry {
        id,
        api_version: req.api_version.to_string(),
        time,
        set: config_set,
    });
    finish(&mut managed);
    let mut out = if object_changed || live.is_none() {
        merged
    } else {
        live_v
    };
    managed.encode_into(&mut out);
    Ok(out)
}

fn finish(managed: &mut Managed) {
    for e in &mut managed.entries {
        e.set = strip_meta(&e.set);
    }
    managed.entries.retain(|e| !e.set.is_empty());
    managed.cap_update_managers(MAX_UPDATE_MANAGERS);
}

/// Fields of the last client-side apply whose live value is still what it set.
fn allowed_by_last_applied(live: &Value, ty: &TypeRef<'_>) -> FieldSet {
    let Some(s) = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    else {
        return FieldSet::new();
    };
    let Ok(last) = serde_json::from_str::<Value>(s) else {
        return FieldSet::new();
    };
    let live_v = without_managed_fields(live);
    let (Ok(set), Ok(modified)) = (
        typed::fields_of(&last, ty),
        typed::modified(&last, &live_v, ty),
    ) else {
        return FieldSet::new();
    };
    set.difference(&modified)
}

/// kubectl's server-side apply rewrites an existing last-applied annotation to the
/// applied configuration (upstream's lastAppliedUpdater).
fn sync_last_applied(obj: &mut Value, applied: &Value) {
    let has = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .is_some();
    if !has {
        return;
    }
    let mut config = applied.clone();
    if let Some(Value::Object(a)) = config.pointer_mut("/metadata/annotations") {
        a.shift_remove(LAST_APPLIED);
    }
    let text = go_json(&config) + "\n";
    if let Some(Value::Object(a)) = obj.pointer_mut("/metadata/annotations") {
        a.insert(LAST_APPLIED.into(), Value::String(text));
    }
}

/// JSON as Go's encoder writes a map: keys sorted, `<`, `>`, `&` escaped.
fn go_json(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut out = Map::new();
                for k in keys {
                    out.insert(k.clone(), sorted(&m[k]));
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            v => v.clone(),
        }
    }
    sorted(v)
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// Records a non-apply write (create, update, JSON/merge/strategic patch, subresource
/// writes) in `new`'s managedFields: the writer's Update entry gains the fields this
/// write added or changed, other managers lose them and the removed ones.
///
/// The client's own managedFields in `new` are kept when it sent a non-empty list
/// (that is how clients rewrite them, e.g. kubectl's client-side to server-side apply
/// migration); an empty list (or none) keeps `old`'s; a list of one empty entry `[{}]`
/// clears them (and this write's fields are then its writer's alone). Subresource
/// writes always start from `old`'s.
pub fn update_managed_fields(
    old: Option<&Value>,
    new: &mut Value,
    req: &Request<'_>,
) -> Result<(), SsaError> {
    let from_old = |old: Option<&Value>| match old {
        Some(o) => Managed::decode(o),
        None => Ok(Managed::default()),
    };
    let client = new
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .filter(|l| !l.is_empty());
    let mut managed = match client {
        _ if req.subresource.is_some() => from_old(old)?,
        Some(l) if l.iter().all(|e| e.as_object().is_some_and(Map::is_empty)) => Managed::default(),
        Some(_) => match Managed::decode(new) {
            Ok(m) if !m.entries.is_empty() => m,
            // Undecodable: keep the stored ones, as upstream.
            _ => from_old(old)?,
        },
        None => from_old(old)?,
    };
    let old_v = old.map(without_managed_fields).unwrap_or_else(|| json!({}));
    let new_v = without_managed_fields(new);
    let (g, v, k) = gvk_of(&new_v, req.api_version);
    let cmp = with_type(&g, &v, &k, |ty| typed::compare(&old_v, &new_v, ty))
        .map_err(|e| SsaError::BadRequest(e.to_string()))?;
    let changed = cmp.modified.union(&cmp.added).without_prefixes(req.ignored);
    for e in &mut managed.entries {
        e.set = e.set.difference(&changed).difference(&cmp.removed);
    }
    let current = strip_meta(&changed);
    if !current.is_empty() {
        let id = ManagerId::new(
            req.manager,
            UPDATE,
            req.api_version,
            req.subresource.unwrap_or(""),
        );
        let set = match managed.get(&id) {
            Some(p) => p.set.union(&current),
            None => current,
        };
        managed.put(Entry {
            id,
            api_version: req.api_version.to_string(),
            time: Some(req.now.to_string()),
            set,
        });
    }
    finish(&mut managed);
    if let Some(Value::Object(meta)) = new.get_mut("metadata") {
        meta.shift_remove("managedFields");
    }
    managed.encode_into(new);
    Ok(())
}

/// Checks client-sent managedFields for a 4xx before storing (upstream validates the
/// operation, apiVersion and fieldsType; Berth also parses FieldsV1).
pub fn validate_managed_fields(obj: &Value) -> Result<(), SsaError> {
    match obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    {
        Some(l) if l.iter().all(|e| e.as_object().is_some_and(Map::is_empty)) => Ok(()),
        _ => Managed::decode(obj).map(|_| ()),
    }
}

#[cfg(test)]
mod cases;
#[cfg(test)]
mod tests;
