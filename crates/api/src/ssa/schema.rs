//! A navigable view of a kind's OpenAPI schema with its merge semantics: which schema a
//! field has, and whether it is a struct, a map, a list (atomic, set, or map with keys)
//! or a scalar. Server-side apply and strategic merge patch both walk objects with it.
//!
//! Schemas come from [`crate::openapi::document`] (one per group-version, built once and
//! kept for the process); list and map semantics from [`crate::openapi::field_semantics`]
//! and [`crate::openapi::is_atomic_struct`], with upstream's fallbacks (kube-openapi's
//! schema conversion): a list without `x-kubernetes-list-type` is a map list keyed by
//! its patch merge key when its patch strategy is `merge`, a set when `merge` has no key,
//! and atomic otherwise.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use serde_json::{Map, Value};

use crate::openapi::{self, Field};
use crate::registry;

/// The `components.schemas` of one group-version document.
#[derive(Debug, Default)]
pub struct Schemas {
    defs: Map<String, Value>,
}

static CACHE: LazyLock<Mutex<HashMap<String, Arc<Schemas>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

impl Schemas {
    /// The schemas of a served group-version (`""`/`v1`, `apps`/`v1`), built once.
    pub fn for_group_version(group: &str, version: &str) -> Option<Arc<Schemas>> {
        let path = if group.is_empty() {
            format!("api/{version}")
        } else {
            format!("apis/{group}/{version}")
        };
        // Custom group-versions change with their CRDs: one entry per generation.
        let key = if registry::resources_in(group, version).any(|r| r.custom.is_some()) {
            format!("{path}#{}", registry::custom_generation())
        } else {
            path.clone()
        };
        // A poisoned lock only means another thread panicked mid-insert; the map is
        // still usable.
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = cache.get(&key) {
            return Some(s.clone());
        }
        let mut doc = openapi::document(&path)?;
        let defs = match doc
            .get_mut("components")
            .and_then(|c| c.get_mut("schemas"))
            .map(Value::take)
        {
            Some(Value::Object(m)) => m,
            _ => return None,
        };
        let s = Arc::new(Schemas { defs });
        cache.insert(key, s.clone());
        Some(s)
    }

    /// The root type of a served kind, or an untyped view when the kind is not served
    /// (everything then merges as upstream's "deduced" type: maps granular, lists atomic).
    pub fn root<'a>(&'a self, group: &str, version: &str, kind: &str) -> TypeRef<'a> {
        let name = registry::lookup_kind(group, version, kind).map(|r| r.schema_name_of());
        match name.and_then(|n| self.defs.get_key_value(n.as_ref())) {
            Some((n, def)) => TypeRef {
                schemas: Some(self),
                node: Some(def),
                name: Some(n.as_str()),
                sem: None,
            },
            None => TypeRef::untyped(),
        }
    }
}

/// What a value of a type is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// An object with named properties.
    Struct,
    /// A map with arbitrary keys (`additionalProperties`).
    Map,
    List,
    Scalar,
    /// No schema: decided by the value (objects are granular maps, lists atomic).
    Untyped,
}

/// How list items are identified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    Atomic,
    /// Scalars identified by value.
    Set,
    /// Objects identified by these key fields.
    Map(Vec<&'static str>),
}

/// One type in a schema, with the semantics of the field that holds it.
#[derive(Debug, Clone, Copy)]
pub struct TypeRef<'a> {
    schemas: Option<&'a Schemas>,
    node: Option<&'a Value>,
    name: Option<&'a str>,
    sem: Option<&'static Field>,
}

impl<'a> TypeRef<'a> {
    /// A type with no schema.
    pub fn untyped() -> TypeRef<'static> {
        TypeRef {
            schemas: None,
            node: None,
            name: None,
            sem: None,
        }
    }

    /// Follows `$ref` / single-element `allOf: [{$ref}]` to the named definition.
    fn resolve(
        schemas: Option<&'a Schemas>,
        node: Option<&'a Value>,
    ) -> (Option<&'a str>, Option<&'a Value>) {
        let Some(n) = node else {
            return (None, None);
        };
        let reference = n.get("$ref").and_then(Value::as_str).or_else(|| {
            n.get("allOf")
                .and_then(Value::as_array)
                .and_then(|a| a.first())
                .and_then(|r| r.get("$ref"))
                .and_then(Value::as_str)
        });
        match (reference, schemas) {
            (Some(r), Some(s)) => {
                let name = r.rsplit('/').next().unwrap_or(r);
                match s.defs.get_key_value(name) {
                    Some((k, v)) => (Some(k.as_str()), Some(v)),
                    None => (None, None),
                }
            }
            _ => (None, Some(n)),
        }
    }

    fn child(&self, node: Option<&'a Value>, sem: Option<&'static Field>) -> TypeRef<'a> {
        let (name, node) = Self::resolve(self.schemas, node);
        TypeRef {
            schemas: self.schemas,
            node,
            name,
            sem,
        }
    }

    /// The upstream schema name (`io.k8s.api.core.v1.PodSpec`), when named.
    pub fn name(&self) -> Option<&'a str> {
        self.name
    }

    /// The semantics of the field holding this type.
    pub fn semantics(&self) -> Option<&'static Field> {
        self.sem
    }

    pub fn shape(&self) -> Shape {
        let Some(n) = self.node else {
            return Shape::Untyped;
        };
        if n.get("properties").is_some() {
            return Shape::Struct;
        }
        if n.get("additionalProperties").is_some() {
            return Shape::Map;
        }
        match n.get("type").and_then(Value::as_str) {
            Some("array") => Shape::List,
            Some("object") => Shape::Untyped,
            Some(_) => Shape::Scalar,
            // Quantity, IntOrString (`oneOf`) and other schemas without a type.
            None if n.get("oneOf").is_some() || n.get("format").is_some() => Shape::Scalar,
            None if n.get("items").is_some() => Shape::List,
            None => Shape::Untyped,
        }
    }

    /// The type of a struct's field (untyped when unknown), with its semantics.
    pub fn field(&self, name: &str) -> TypeRef<'a> {
        let node = self
            .node
            .and_then(|n| n.get("properties"))
            .and_then(|p| p.get(name));
        let sem = self.name.and_then(|s| openapi::field_semantics(s, name));
        match (node, self.shape()) {
            (Some(node), _) => self.child(Some(node), sem),
            // Values of a map all share one type.
            (None, Shape::Map) => self.elem(),
            _ => TypeRef::untyped(),
        }
    }

    /// The type of a list's items or a map's values.
    pub fn elem(&self) -> TypeRef<'a> {
        let node = self
            .node
            .and_then(|n| n.get("items").or_else(|| n.get("additionalProperties")))
            .filter(|v| v.is_object());
        match node {
            Some(node) => self.child(Some(node), None),
            None => TypeRef::untyped(),
        }
    }

    /// How a list's items are identified (server-side apply's view).
    pub fn list_kind(&self) -> ListKind {
        let Some(f) = self.sem else {
            return self.list_kind_from_schema();
        };
        match f.list_type {
            "atomic" => return ListKind::Atomic,
            "set" => return ListKind::Set,
            "map" if !f.list_map_keys.is_empty() => return ListKind::Map(f.list_map_keys.to_vec()),
            _ => {}
        }
        if f.patch_strategy.split(',').any(|s| s == "merge") {
            if f.patch_merge_key.is_empty() {
                return ListKind::Set;
            }
            return ListKind::Map(vec![f.patch_merge_key]);
        }
        ListKind::Atomic
    }

    /// A list's kind from the schema's own extensions (custom resources' schemas
    /// carry them; built-in ones come from the semantics table): atomic unless
    /// `x-kubernetes-list-type` says otherwise, as upstream's CRD default.
    fn list_kind_from_schema(&self) -> ListKind {
        let Some(n) = self.node else {
            return ListKind::Atomic;
        };
        match n.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListKind::Set,
            Some("map") => {
                let keys: Vec<&'static str> = n
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(crate::crd::intern)
                            .collect()
                    })
                    .unwrap_or_default();
                if keys.is_empty() {
                    ListKind::Atomic
                } else {
                    ListKind::Map(keys)
                }
            }
            _ => ListKind::Atomic,
        }
    }

    /// Whether a struct or map is replaced as a whole (`x-kubernetes-map-type: atomic`).
    pub fn is_atomic_map(&self) -> bool {
        if self.sem.is_some_and(|f| f.map_type == "atomic") {
            return true;
        }
        if self.sem.is_none()
            && self
                .node
                .and_then(|n| n.get("x-kubernetes-map-type"))
                .and_then(Value::as_str)
                == Some("atomic")
        {
            return true;
        }
        self.name.is_some_and(openapi::is_atomic_struct)
    }

    /// Strategic merge patch: (`retainKeys` present, the other strategy) of this field.
    pub fn patch_strategy(&self) -> (bool, &'static str) {
        let Some(f) = self.sem else {
            return (false, "");
        };
        let mut retain = false;
        let mut other = "";
        for s in f.patch_strategy.split(',').filter(|s| !s.is_empty()) {
            if s == "retainKeys" {
                retain = true;
            } else {
                other = s;
            }
        }
        (retain, other)
    }

    /// Strategic merge patch: the merge key of this list field.
    pub fn patch_merge_key(&self) -> &'static str {
        self.sem.map(|f| f.patch_merge_key).unwrap_or("")
    }
}

/// The type of a kind: `Schemas` kept alive with a root view. `None` for kinds not served.
pub fn schemas_for(group: &str, version: &str) -> Option<Arc<Schemas>> {
    Schemas::for_group_version(group, version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn navigates_deployment() {
        let s = schemas_for("apps", "v1").unwrap();
        let root = s.root("apps", "v1", "Deployment");
        assert_eq!(root.name(), Some("io.k8s.api.apps.v1.Deployment"));
        let pod = root.field("spec").field("template").field("spec");
        assert_eq!(pod.name(), Some("io.k8s.api.core.v1.PodSpec"));
        let containers = pod.field("containers");
        assert_eq!(containers.shape(), Shape::List);
        assert_eq!(containers.list_kind(), ListKind::Map(vec!["name"]));
        assert_eq!(containers.patch_strategy(), (false, "merge"));
        let c = containers.elem();
        assert_eq!(c.name(), Some("io.k8s.api.core.v1.Container"));
        assert_eq!(c.field("args").list_kind(), ListKind::Atomic);
        assert_eq!(
            c.field("ports").list_kind(),
            ListKind::Map(vec!["containerPort", "protocol"])
        );
        assert_eq!(pod.field("tolerations").list_kind(), ListKind::Atomic);
        assert!(pod.field("nodeSelector").is_atomic_map());
        assert_eq!(pod.field("nodeSelector").shape(), Shape::Map);
        assert_eq!(pod.field("volumes").patch_strategy(), (true, "merge"));
        assert_eq!(root.field("spec").field("replicas").shape(), Shape::Scalar);
        let meta = root.field("metadata");
        assert_eq!(meta.field("labels").shape(), Shape::Map);
        assert!(!meta.field("labels").is_atomic_map());
        assert_eq!(meta.field("finalizers").list_kind(), ListKind::Set);
        assert!(root.field("spec").field("selector").is_atomic_map());
        assert_eq!(
            c.field("resources").field("limits").elem().shape(),
            Shape::Scalar
        );
    }

    #[test]
    fn unknown_kind_is_untyped() {
        let s = schemas_for("apps", "v1").unwrap();
        assert_eq!(s.root("apps", "v1", "Nope").shape(), Shape::Untyped);
        assert!(schemas_for("nope.io", "v1").is_none());
    }
}
