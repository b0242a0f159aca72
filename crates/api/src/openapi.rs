//! OpenAPI v3 documents, as upstream's kube-apiserver serves them at `/openapi/v3`.
//!
//! - `GET /openapi/v3` → [`index`]: `{"paths": {"api/v1": {"serverRelativeURL":
//!   "/openapi/v3/api/v1?hash=<HASH>"}, …}}`.
//! - `GET /openapi/v3/<group-version>` → [`document`]: one OpenAPI 3.0 document per
//!   group-version (`api/v1`, `apis/apps/v1`, …) with every path and operation of that
//!   group-version and `components.schemas` holding every schema they reach.
//!
//! Generating all documents takes about 0.2 s in a debug build and 0.06 s in release
//! (see the `timing` test), so the server renders everything once ([`cached`], or
//! [`OpenApiV3::build`]) and serves the bytes.
//! Upstream answers a request whose `?hash=` matches with
//! `Cache-Control: public, immutable`, and sets `ETag: "<HASH>"`; any other hash gets the
//! current document with `Cache-Control: no-cache, private`.
//!
//! `/openapi/v2` ([`v2`]) is derived from these documents, in JSON and in gnostic's
//! protobuf: kubectl 1.27/1.28 read it for `apply` and `explain`; 1.29+ use v3.
//!
//! Schemas come from k8s-openapi's `schemars` output (descriptions, `required`), reshaped
//! to upstream's v3 form: a `$ref` with siblings becomes `allOf: [{$ref}]` plus the
//! siblings, `Quantity` and `IntOrString` are `oneOf`s, root kinds carry
//! `x-kubernetes-group-version-kind`, list kinds (`DeploymentList`) are added, the
//! list/map extensions of [`FIELD_SEMANTICS`]/[`ATOMIC_STRUCTS`] and the enumerations of
//! [`ENUMS`] (with upstream's "Possible enum values" text) are added, and `required` is
//! corrected where k8s-openapi differs from upstream ([`REQUIRED_OVERRIDES`]).
//!
//! Not reproduced: upstream's `default` values on properties, the `apply-patch+cbor` /
//! `application/cbor` media types, the group (`apis/apps`) and `api`/`apis`/`version`
//! documents of upstream's index, and exact wording of list kinds' and parameters'
//! descriptions.

mod semantics;
mod sha512;
pub mod v2;

use std::collections::BTreeMap;

use k8s_openapi::schemars::generate::SchemaSettings;
use k8s_openapi::schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::registry::{self, ResourceType};

pub use semantics::{ATOMIC_STRUCTS, ENUMS, EnumField, FIELD_SEMANTICS, Field};

/// `info.version` of every document (the Kubernetes version Berth implements).
pub const KUBERNETES_VERSION: &str = "v1.33.0";

/// The list/map semantics of `field` in the schema named `schema` (upstream dotted
/// name, e.g. `io.k8s.api.core.v1.PodSpec`), for strategic merge and apply.
pub fn field_semantics(schema: &str, field: &str) -> Option<&'static Field> {
    FIELD_SEMANTICS
        .iter()
        .find(|(s, _)| *s == schema)
        .and_then(|(_, fields)| fields.iter().find(|f| f.name == field))
}

/// Whether objects of the schema are atomic (`x-kubernetes-map-type: atomic`).
pub fn is_atomic_struct(schema: &str) -> bool {
    ATOMIC_STRUCTS.contains(&schema)
}

/// Resources whose DELETE answers with the deleted object rather than a `Status`
/// (upstream's `ReturnDeletedObject` registries), as their DELETE operations say.
pub const RETURNS_DELETED_OBJECT: &[(&str, &str)] = &[
    ("", "pods"),
    ("", "services"),
    ("", "persistentvolumes"),
    ("", "persistentvolumeclaims"),
    ("", "serviceaccounts"),
    ("", "podtemplates"),
    ("", "resourcequotas"),
    ("storage.k8s.io", "storageclasses"),
    ("storage.k8s.io", "csidrivers"),
    ("storage.k8s.io", "csinodes"),
    ("storage.k8s.io", "volumeattachments"),
];

/// Where k8s-openapi's `required` differs from upstream 1.33's, besides `metadata`
/// (k8s-openapi marks it required on every kind, upstream never does; that is removed
/// everywhere). Each entry replaces the whole list; an empty list removes `required`.
/// Found by comparing every served schema with the published API's `+optional` markers
/// and `omitempty` tags.
pub const REQUIRED_OVERRIDES: &[(&str, &[&str])] = &[
    // `name` is `+optional` with a default of "" upstream.
    ("io.k8s.api.core.v1.ConfigMapEnvSource", &[]),
    ("io.k8s.api.core.v1.ConfigMapKeySelector", &["key"]),
    ("io.k8s.api.core.v1.ConfigMapProjection", &[]),
    ("io.k8s.api.core.v1.ConfigMapVolumeSource", &[]),
    ("io.k8s.api.core.v1.LocalObjectReference", &[]),
    ("io.k8s.api.core.v1.SecretEnvSource", &[]),
    ("io.k8s.api.core.v1.SecretKeySelector", &["key"]),
    ("io.k8s.api.core.v1.SecretProjection", &[]),
    // Required upstream, optional in k8s-openapi. core/v1 Event is the one kind whose
    // metadata upstream marks required.
    ("io.k8s.api.core.v1.Event", &["metadata", "involvedObject"]),
    ("io.k8s.api.events.v1.Event", &["eventTime"]),
    (
        "io.k8s.api.networking.v1.NetworkPolicySpec",
        &["podSelector"],
    ),
];

// ---------------------------------------------------------------------------------
// Index, paths, hashes, cache.

/// All group-version paths served (`api/v1`, `apis/apps/v1`, …), in discovery order.
pub fn paths() -> Vec<String> {
    let mut out = Vec::new();
    for g in registry::builtin_groups() {
        for v in g.versions {
            out.push(gv_path(g.name, v));
        }
    }
    out
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// Splits `api/v1` / `apis/apps/v1` into (group, version).
fn parse_gv_path(path: &str) -> Option<(&str, &str)> {
    let path = path.trim_matches('/');
    if let Some(v) = path.strip_prefix("api/") {
        return (!v.is_empty() && !v.contains('/')).then_some(("", v));
    }
    let rest = path.strip_prefix("apis/")?;
    let (g, v) = rest.split_once('/')?;
    (!g.is_empty() && !v.is_empty() && !v.contains('/')).then_some((g, v))
}

/// The `/openapi/v3` index for documents with the given hashes: pairs of
/// (group-version path, hash), e.g. `("apis/apps/v1", "9F2A…")`.
pub fn index<'a>(hashes: impl IntoIterator<Item = (&'a str, &'a str)>) -> Value {
    let mut paths = Map::new();
    let mut entries: Vec<(&str, &str)> = hashes.into_iter().collect();
    entries.sort();
    for (path, hash) in entries {
        paths.insert(
            path.to_string(),
            json!({ "serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}") }),
        );
    }
    json!({ "paths": paths })
}

/// The content hash of a document's bytes: upper-case hex SHA-512, as upstream.
pub fn hash(bytes: &[u8]) -> String {
    sha512::hex_upper(bytes)
}

/// One rendered document.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// Compact JSON.
    pub bytes: Vec<u8>,
    /// [`hash`] of `bytes`.
    pub hash: String,
}

/// Every document rendered once, with the index, for the server to cache.
#[derive(Debug, Clone)]
pub struct OpenApiV3 {
    /// The `/openapi/v3` body.
    pub index: Vec<u8>,
    /// By group-version path (`api/v1`, `apis/apps/v1`).
    pub documents: BTreeMap<String, Rendered>,
}

/// Every document, rendered on first use and kept for the life of the process.
pub fn cached() -> &'static OpenApiV3 {
    static CACHE: std::sync::LazyLock<OpenApiV3> = std::sync::LazyLock::new(OpenApiV3::build);
    &CACHE
}

impl OpenApiV3 {
    /// Generates and serializes every document.
    pub fn build() -> OpenApiV3 {
        let mut documents = BTreeMap::new();
        for path in paths() {
            let doc = document(&path).expect("every listed group-version has a document");
            let bytes = serde_json::to_vec(&doc).expect("JSON values serialize");
            let hash = hash(&bytes);
            documents.insert(path, Rendered { bytes, hash });
        }
        let idx = index(documents.iter().map(|(p, r)| (p.as_str(), r.hash.as_str())));
        OpenApiV3 {
            index: serde_json::to_vec(&idx).expect("JSON values serialize"),
            documents,
        }
    }

    /// The document at a group-version path (leading/trailing slashes ignored).
    pub fn get(&self, path: &str) -> Option<&Rendered> {
        self.documents.get(path.trim_matches('/'))
    }
}

// ---------------------------------------------------------------------------------
// Documents.

/// One group-version document (`api/v1`, `apis/apps/v1`, …); `None` if not served.
pub fn document(group_version_path: &str) -> Option<Value> {
    let (group, version) = parse_gv_path(group_version_path)?;
    let resources: Vec<&'static ResourceType> = registry::resources_in(group, version).collect();
    if resources.is_empty() {
        return None;
    }
    let schemas = schemas_for(group, version, &resources);
    let mut paths = Map::new();
    let gv = GroupVersion::new(group, version);
    paths.insert(format!("{}/", gv.base), api_resources_path(&gv));
    for r in &resources {
        resource_paths(&gv, r, &mut paths);
    }
    if resources.iter().all(|r| r.custom.is_some()) {
        custom_media_types(&mut paths);
    }
    let mut doc = json!({
        "openapi": "3.0.0",
        "info": { "title": "Kubernetes", "version": KUBERNETES_VERSION },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {
                "BearerToken": {
                    "type": "apiKey",
                    "description": "Bearer Token authentication",
                    "name": "authorization",
                    "in": "header",
                },
            },
        },
        "security": [{ "BearerToken": [] }],
    });
    doc.sort_all_objects();
    Some(doc)
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({ "group": group, "version": version, "kind": kind })
}

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";

fn schema_ref(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

/// The schema name of a resource's list kind (`…apps.v1.Deployment` → `…apps.v1.DeploymentList`).
fn list_schema_name(r: &ResourceType) -> String {
    let name = r.schema_name_of();
    match name.rsplit_once('.') {
        Some((prefix, _)) => format!("{prefix}.{}", r.list_kind),
        None => r.list_kind.to_string(),
    }
}

fn subschema<T: JsonSchema>(g: &mut SchemaGenerator) -> String {
    let _ = g.subschema_for::<T>();
    T::schema_name().into_owned()
}

/// Every schema the group-version's paths reach, upstream-shaped.
fn schemas_for(
    group: &str,
    version: &str,
    resources: &[&'static ResourceType],
) -> Map<String, Value> {
    use k8s_openapi::api;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

    let mut g = SchemaSettings::openapi3()
        .with(|s| {
            s.meta_schema = None;
            s.transforms.clear();
        })
        .into_generator();

    let mut roots: Vec<(String, Value, Value)> = Vec::new(); // (name, schema, gvk list)
    for r in resources {
        let schema = match r.custom {
            Some(cr) => custom_root_schema(cr),
            None => (r.schema)(&mut g).to_value(),
        };
        roots.push((
            r.schema_name_of().into_owned(),
            schema,
            json!([gvk(r.group, r.version, r.kind)]),
        ));
    }

    // Meta types every document refers to.
    let status = subschema::<meta::Status>(&mut g);
    let delete_options = subschema::<meta::DeleteOptions>(&mut g);
    let watch_event = subschema::<meta::WatchEvent<api::core::v1::ConfigMap>>(&mut g);
    subschema::<meta::Patch>(&mut g);
    subschema::<meta::APIResourceList>(&mut g);
    subschema::<meta::ListMeta>(&mut g);
    if resources.iter().any(|r| r.custom.is_some()) {
        subschema::<meta::ObjectMeta>(&mut g);
    }

    // Subresource bodies, with the kind they carry.
    let mut extra_gvks: Vec<(String, Value)> = vec![(status, json!([gvk("", "v1", "Status")]))];
    let all_gvs: Vec<(&str, &str)> = {
        let mut v = vec![];
        for grp in registry::groups() {
            for ver in grp.versions {
                v.push((grp.name, ver));
            }
        }
        v
    };
    for name in [delete_options, watch_event] {
        let kind = name.rsplit('.').next().unwrap_or_default().to_string();
        let list: Vec<Value> = all_gvs.iter().map(|(gr, ve)| gvk(gr, ve, &kind)).collect();
        extra_gvks.push((name, Value::Array(list)));
    }
    let has = |sub: &str| resources.iter().any(|r| r.has_subresource(sub));
    if has("scale") {
        let n = subschema::<api::autoscaling::v1::Scale>(&mut g);
        extra_gvks.push((n, json!([gvk("autoscaling", "v1", "Scale")])));
    }
    if has("binding") {
        let n = subschema::<api::core::v1::Binding>(&mut g);
        extra_gvks.push((n, json!([gvk("", "v1", "Binding")])));
    }
    if has("eviction") {
        let n = subschema::<api::policy::v1::Eviction>(&mut g);
        extra_gvks.push((n, json!([gvk("policy", "v1", "Eviction")])));
    }
    if has("token") {
        let n = subschema::<api::authentication::v1::TokenRequest>(&mut g);
        extra_gvks.push((
            n,
            json!([gvk("authentication.k8s.io", "v1", "TokenRequest")]),
        ));
    }

    if (group, version) == ("networking.k8s.io", "v1beta1") {
        // v1beta1's servicePort.
        subschema::<k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>(&mut g);
    }
    let mut defs: Map<String, Value> = g.take_definitions(false);
    for (name, schema, gvks) in roots {
        let mut schema = schema;
        if let Some(o) = schema.as_object_mut() {
            o.insert("x-kubernetes-group-version-kind".into(), gvks);
        }
        defs.insert(name, schema);
    }
    for r in resources.iter().filter(|r| !r.is_review()) {
        defs.insert(list_schema_name(r), list_schema(group, version, r));
    }
    for (name, gvks) in extra_gvks {
        if let Some(o) = defs.get_mut(&name).and_then(Value::as_object_mut) {
            o.insert("x-kubernetes-group-version-kind".into(), gvks);
        }
    }
    if let Some((from, to)) = renamed_package(group, version) {
        defs = rename_package(defs, from, to);
        if group == "autoscaling" && version == "v2beta2" {
            hpa_v2beta2_scaling_rules(&mut defs);
        }
        if group == "networking.k8s.io" && version == "v1beta1" {
            crate::networking::v1beta1_schemas(&mut defs);
        }
    }
    reshape(&mut defs);
    defs
}

/// Custom resources are served as JSON and YAML only and take no strategic merge
/// patch: their documents say so (kubectl's apply picks its patch type from here).
fn custom_media_types(paths: &mut Map<String, Value>) {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                if let Some(Value::Object(content)) = m.get_mut("content") {
                    content.retain(|t, _| {
                        t != "application/strategic-merge-patch+json"
                            && !t.starts_with("application/vnd.kubernetes.protobuf")
                    });
                }
                m.values_mut().for_each(walk);
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    paths.values_mut().for_each(walk);
}

/// A custom resource's schema as upstream's apiextensions-apiserver publishes it:
/// the CRD version's `openAPIV3Schema` with `apiVersion`, `kind` and `metadata`
/// (a reference to ObjectMeta) added at the root.
fn custom_root_schema(cr: &crate::crd::CustomResource) -> Value {
    let mut root = cr
        .schema
        .clone()
        .unwrap_or_else(|| json!({"type": "object"}));
    let Some(obj) = root.as_object_mut() else {
        return json!({"type": "object"});
    };
    let props = obj.entry("properties").or_insert_with(|| json!({}));
    if let Some(p) = props.as_object_mut() {
        p.insert(
            "apiVersion".into(),
            json!({"type": "string", "description": API_VERSION_DESC}),
        );
        p.insert(
            "kind".into(),
            json!({"type": "string", "description": KIND_DESC}),
        );
        p.insert(
            "metadata".into(),
            json!({"allOf": [schema_ref(&format!("{META}.ObjectMeta"))], "description": METADATA_DESC}),
        );
    }
    obj.entry("type").or_insert_with(|| json!("object"));
    root
}

const API_VERSION_DESC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DESC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// Group-versions served through another version's k8s-openapi types, whose schemas
/// take upstream's package names: (group, version, types' prefix, upstream prefix).
/// Renaming happens before [`reshape`], so the list/map extensions keyed by the
/// original names (v2's `+listType` markers) are not carried over: upstream's v2beta2
/// types had none.
const RENAMED_PACKAGES: &[(&str, &str, &str, &str)] = &[
    (
        "networking.k8s.io",
        "v1beta1",
        "io.k8s.api.networking.v1.",
        "io.k8s.api.networking.v1beta1.",
    ),
    (
        "autoscaling",
        "v2beta2",
        "io.k8s.api.autoscaling.v2.",
        "io.k8s.api.autoscaling.v2beta2.",
    ),
];

fn renamed_package(group: &str, version: &str) -> Option<(&'static str, &'static str)> {
    RENAMED_PACKAGES
        .iter()
        .find(|(g, v, _, _)| *g == group && *v == version)
        .map(|&(_, _, from, to)| (from, to))
}

/// Renames every schema under `from` to `to`, and every `$ref` to one.
fn rename_package(defs: Map<String, Value>, from: &str, to: &str) -> Map<String, Value> {
    fn refs(v: &mut Value, from: &str, to: &str) {
        match v {
            Value::Object(o) => {
                for (k, child) in o.iter_mut() {
                    if k == "$ref"
                        && let Value::String(r) = child
                        && let Some(name) = r.strip_prefix("#/components/schemas/")
                        && let Some(rest) = name.strip_prefix(from)
                    {
                        *r = format!("#/components/schemas/{to}{rest}");
                    } else {
                        refs(child, from, to);
                    }
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|c| refs(c, from, to)),
            _ => {}
        }
    }
    defs.into_iter()
        .map(|(name, mut schema)| {
            refs(&mut schema, from, to);
            match name.strip_prefix(from) {
                Some(rest) => (format!("{to}{rest}"), schema),
                None => (name, schema),
            }
        })
        .collect()
}

/// upstream's v2beta2 `HPAScalingRules`: no `tolerance` (added to v2 in 1.33), and
/// the descriptions of `k8s.io/api/autoscaling/v2beta2`.
fn hpa_v2beta2_scaling_rules(defs: &mut Map<String, Value>) {
    let Some(rules) = defs
        .get_mut("io.k8s.api.autoscaling.v2beta2.HPAScalingRules")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    rules.insert(
        "description".into(),
        "HPAScalingRules configures the scaling behavior for one direction. These Rules are applied after calculating DesiredReplicas from metrics for the HPA. They can limit the scaling velocity by specifying scaling policies. They can prevent flapping by specifying the stabilization window, so that the number of replicas is not set instantly, instead, the safest value from the stabilization window is chosen.".into(),
    );
    let Some(props) = rules.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    props.remove("tolerance");
    for (field, desc) in [
        (
            "policies",
            "policies is a list of potential scaling polices which can be used during scaling. At least one policy must be specified, otherwise the HPAScalingRules will be discarded as invalid",
        ),
        (
            "selectPolicy",
            "selectPolicy is used to specify which policy should be used. If not set, the default value MaxPolicySelect is used.",
        ),
        (
            "stabilizationWindowSeconds",
            "StabilizationWindowSeconds is the number of seconds for which past recommendations should be considered while scaling up or scaling down. StabilizationWindowSeconds must be greater than or equal to zero and less than or equal to 3600 (one hour). If not set, use the default values: - For scale up: 0 (i.e. no stabilization is done). - For scale down: 300 (i.e. the stabilization window is 300 seconds long).",
        ),
    ] {
        if let Some(p) = props.get_mut(field).and_then(Value::as_object_mut) {
            p.insert("description".into(), desc.into());
        }
    }
}

fn list_schema(group: &str, version: &str, r: &ResourceType) -> Value {
    json!({
        "description": format!("{} is a list of {} objects.", r.list_kind, r.kind),
        "type": "object",
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
                "type": "string",
            },
            "items": {
                "description": format!("The list of {} objects.", r.kind),
                "type": "array",
                "items": schema_ref(&r.schema_name_of()),
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                "type": "string",
            },
            "metadata": {
                "allOf": [schema_ref(&format!("{META}.ListMeta"))],
                "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
            },
        },
        "required": ["items"],
        "x-kubernetes-group-version-kind": [gvk(group, version, r.list_kind)],
    })
}

/// Upstream's v3 shape: extensions, `required` fixes, special scalar types, and
/// `$ref` siblings moved beside an `allOf`.
fn reshape(defs: &mut Map<String, Value>) {
    if let Some(q) = defs.get_mut("io.k8s.apimachinery.pkg.api.resource.Quantity") {
        let desc = q.get("description").cloned();
        *q = json!({ "oneOf": [{ "type": "string" }, { "type": "number" }] });
        if let Some(d) = desc {
            q["description"] = d;
        }
    }
    if let Some(q) = defs.get_mut("io.k8s.apimachinery.pkg.util.intstr.IntOrString") {
        let desc = q.get("description").cloned();
        *q = json!({
            "format": "int-or-string",
            "oneOf": [{ "type": "integer" }, { "type": "string" }],
            "x-kubernetes-int-or-string": true,
        });
        if let Some(d) = desc {
            q["description"] = d;
        }
    }
    for (schema, fields) in FIELD_SEMANTICS {
        let Some(props) = defs
            .get_mut(*schema)
            .and_then(|s| s.get_mut("properties"))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        for f in *fields {
            let Some(p) = props.get_mut(f.name).and_then(Value::as_object_mut) else {
                continue;
            };
            if !f.list_type.is_empty() {
                p.insert("x-kubernetes-list-type".into(), f.list_type.into());
            }
            if !f.list_map_keys.is_empty() {
                p.insert("x-kubernetes-list-map-keys".into(), json!(f.list_map_keys));
            }
            if !f.map_type.is_empty() {
                p.insert("x-kubernetes-map-type".into(), f.map_type.into());
            }
            if !f.patch_merge_key.is_empty() {
                p.insert(
                    "x-kubernetes-patch-merge-key".into(),
                    f.patch_merge_key.into(),
                );
            }
            if !f.patch_strategy.is_empty() {
                p.insert(
                    "x-kubernetes-patch-strategy".into(),
                    f.patch_strategy.into(),
                );
            }
        }
    }
    for (schema, fields) in ENUMS {
        let Some(props) = defs
            .get_mut(*schema)
            .and_then(|s| s.get_mut("properties"))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        for (field, on_items, values) in *fields {
            let Some(p) = props.get_mut(*field) else {
                continue;
            };
            let list: Vec<&str> = values.iter().map(|(v, _)| *v).collect();
            if *on_items {
                if let Some(items) = p.get_mut("items").and_then(Value::as_object_mut) {
                    items.insert("enum".into(), json!(list));
                }
                continue;
            }
            let Some(p) = p.as_object_mut() else { continue };
            p.insert("enum".into(), json!(list));
            // Upstream appends the values' documentation to the field's.
            let mut desc = p
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            desc.push_str("\n\nPossible enum values:");
            for (v, doc) in *values {
                desc.push_str(&format!("\n - `\"{v}\"`"));
                if !doc.is_empty() {
                    desc.push(' ');
                    desc.push_str(doc);
                }
            }
            p.insert("description".into(), desc.into());
        }
    }
    for name in ATOMIC_STRUCTS {
        if let Some(o) = defs.get_mut(*name).and_then(Value::as_object_mut) {
            o.insert("x-kubernetes-map-type".into(), "atomic".into());
        }
    }
    for schema in defs.values_mut() {
        let Some(o) = schema.as_object_mut() else {
            continue;
        };
        let Some(Value::Array(req)) = o.get_mut("required") else {
            continue;
        };
        req.retain(|f| f != "metadata");
        if req.is_empty() {
            o.remove("required");
        }
    }
    for (name, required) in REQUIRED_OVERRIDES {
        if let Some(o) = defs.get_mut(*name).and_then(Value::as_object_mut) {
            if required.is_empty() {
                o.remove("required");
            } else {
                o.insert("required".into(), json!(required));
            }
        }
    }
    for schema in defs.values_mut() {
        wrap_ref_siblings(schema);
    }
}

/// OpenAPI 3.0 ignores siblings of `$ref`; upstream puts the `$ref` in a one-element
/// `allOf` and keeps `description` (and extensions) beside it.
fn wrap_ref_siblings(v: &mut Value) {
    match v {
        Value::Object(o) => {
            for (k, child) in o.iter_mut() {
                match (k.as_str(), child) {
                    // Maps of names to schemas: the names are not keywords
                    // (JSONSchemaProps has properties called `$ref` and `allOf`).
                    ("properties" | "patternProperties" | "definitions", Value::Object(m)) => {
                        m.values_mut().for_each(wrap_ref_siblings)
                    }
                    (_, child) => wrap_ref_siblings(child),
                }
            }
            let moved = if o.len() > 1 { o.remove("$ref") } else { None };
            if let Some(r) = moved {
                o.insert("allOf".into(), json!([{ "$ref": r }]));
            }
        }
        Value::Array(a) => a.iter_mut().for_each(wrap_ref_siblings),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------
// Paths and operations.

struct GroupVersion {
    group: String,
    version: String,
    /// `/api/v1` or `/apis/apps/v1`.
    base: String,
    /// `CoreV1`, `AppsV1`, `RbacAuthorizationV1`: the operationId infix.
    camel: String,
    /// `core_v1`, `rbacAuthorization_v1`.
    tag: String,
}

fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

impl GroupVersion {
    fn new(group: &str, version: &str) -> GroupVersion {
        let group_camel = if group.is_empty() {
            "Core".to_string()
        } else {
            group
                .trim_end_matches(".k8s.io")
                .split('.')
                .map(upper_first)
                .collect()
        };
        let mut tag_group = group_camel.clone();
        if let Some(first) = tag_group.get_mut(0..1) {
            first.make_ascii_lowercase();
        }
        GroupVersion {
            group: group.to_string(),
            version: version.to_string(),
            base: format!("/{}", gv_path(group, version)),
            camel: format!("{group_camel}{}", upper_first(version)),
            tag: format!("{tag_group}_{version}"),
        }
    }
}

const JSON_YAML_PB: &[&str] = &[
    "application/json",
    "application/vnd.kubernetes.protobuf",
    "application/yaml",
];
const WATCHABLE: &[&str] = &[
    "application/json",
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf",
    "application/vnd.kubernetes.protobuf;stream=watch",
    "application/yaml",
];
const PATCH_TYPES: &[&str] = &[
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

fn content(types: &[&str], schema: &Value) -> Value {
    let mut m = Map::new();
    for t in types {
        m.insert((*t).to_string(), json!({ "schema": schema }));
    }
    Value::Object(m)
}

/// `responses` with the given codes, each answering `schema` in `types`.
fn responses(codes: &[&str], types: &[&str], schema: &Value) -> Value {
    let mut m = Map::new();
    for code in codes {
        let desc = match *code {
            "200" => "OK",
            "201" => "Created",
            "202" => "Accepted",
            _ => "",
        };
        m.insert(
            (*code).to_string(),
            json!({ "content": content(types, schema), "description": desc }),
        );
    }
    m.insert("401".into(), json!({ "description": "Unauthorized" }));
    Value::Object(m)
}

fn param(location: &str, name: &str, ty: &str, description: &str) -> Value {
    let mut p = json!({
        "description": description,
        "in": location,
        "name": name,
        "schema": { "type": ty, "uniqueItems": true },
    });
    if location == "path" {
        p["required"] = true.into();
    }
    p
}

fn q(name: &str) -> Value {
    let (ty, desc) = match name {
        "allowWatchBookmarks" => (
            "boolean",
            "allowWatchBookmarks requests watch events of type BOOKMARK. Servers may ignore it and send bookmarks at their discretion. Ignored unless watching.",
        ),
        "continue" => (
            "string",
            "The continue token from a previous chunked list result, to get the next chunk. Tokens expire (410 ResourceExpired). Not supported when watching.",
        ),
        "dryRun" => (
            "string",
            "When present, modifications are not persisted. The only valid value is All: every dry-run stage is processed.",
        ),
        "fieldManager" => (
            "string",
            "fieldManager names the actor or entity making these changes: at most 128 printable characters. Required for apply requests (application/apply-patch), optional for other requests.",
        ),
        "fieldSelector" => (
            "string",
            "A selector restricting the returned objects by their fields. Defaults to everything.",
        ),
        "fieldValidation" => (
            "string",
            "fieldValidation tells the server how to handle objects in the request (POST/PUT/PATCH) that contain unknown or duplicate fields: Ignore drops them silently, Warn (the default) drops them with a warning header each, Strict rejects the request with a BadRequest listing them.",
        ),
        "force" => (
            "boolean",
            "Force re-acquires conflicting fields owned by other managers on an apply request. Must be unset for non-apply patches.",
        ),
        "gracePeriodSeconds" => (
            "integer",
            "Seconds before the object is deleted: a non-negative integer, zero meaning immediately. Unset uses the type's default grace period.",
        ),
        "ignoreStoreReadErrorWithClusterBreakingPotential" => (
            "boolean",
            "If true, deletes an object that cannot be read from storage (corrupt), skipping finalizers and preconditions. Unsafe; defaults to false.",
        ),
        "labelSelector" => (
            "string",
            "A selector restricting the returned objects by their labels. Defaults to everything.",
        ),
        "limit" => (
            "integer",
            "The maximum number of items to return. When more exist the list's metadata carries a continue token. Not supported when watching.",
        ),
        "orphanDependents" => (
            "boolean",
            "Deprecated: use propagationPolicy. Whether dependents are orphaned (adds or removes the orphan finalizer). Only one of the two may be set.",
        ),
        "pretty" => ("string", "If 'true', the output is pretty-printed."),
        "propagationPolicy" => (
            "string",
            "Whether and how garbage collection is performed: Orphan, Background or Foreground. Only one of this and orphanDependents may be set.",
        ),
        "resourceVersion" => (
            "string",
            "resourceVersion constrains which resource versions a request may be served from. See https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions. Defaults to unset.",
        ),
        "resourceVersionMatch" => (
            "string",
            "resourceVersionMatch says how resourceVersion applies to list calls (Exact or NotOlderThan). Defaults to unset.",
        ),
        "sendInitialEvents" => (
            "boolean",
            "With watch=true, starts the stream with synthetic ADDED events for the current objects followed by a BOOKMARK annotated k8s.io/initial-events-end. Requires resourceVersionMatch=NotOlderThan.",
        ),
        "timeoutSeconds" => (
            "integer",
            "Timeout for the list or watch call, regardless of activity.",
        ),
        "watch" => (
            "boolean",
            "Watch for changes to the described resources and return them as a stream of add, update and remove notifications. Specify resourceVersion.",
        ),
        other => ("string", other),
    };
    param("query", name, ty, desc)
}

fn qs(names: &[&str]) -> Value {
    Value::Array(names.iter().map(|n| q(n)).collect())
}

const LIST_PARAMS: &[&str] = &[
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
];
const WRITE_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];
const PATCH_PARAMS: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force"];
const DELETE_PARAMS: &[&str] = &[
    "dryRun",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "orphanDependents",
    "propagationPolicy",
];
const DELETE_COLLECTION_PARAMS: &[&str] = &[
    "continue",
    "dryRun",
    "fieldSelector",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "labelSelector",
    "limit",
    "orphanDependents",
    "propagationPolicy",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
];

fn namespace_param() -> Value {
    param(
        "path",
        "namespace",
        "string",
        "object name and auth scope, such as for teams and projects",
    )
}

/// Path-level parameters: `name` (when given), `namespace` (when namespaced), then
/// `extra` query parameters, then `pretty`.
fn path_params(name_of: Option<&str>, namespaced: bool, extra: &[&str]) -> Value {
    let mut v = Vec::new();
    if let Some(kind) = name_of {
        v.push(param(
            "path",
            "name",
            "string",
            &format!("name of the {kind}"),
        ));
    }
    if namespaced {
        v.push(namespace_param());
    }
    let mut names: Vec<&str> = extra.to_vec();
    names.push("pretty");
    names.sort();
    v.extend(names.iter().map(|n| q(n)));
    Value::Array(v)
}

struct Op<'a> {
    gv: &'a GroupVersion,
    id: String,
    description: String,
    action: &'a str,
    /// (group, version, kind) of the operation.
    kind: (&'a str, &'a str, &'a str),
    params: Value,
    body: Option<Value>,
    responses: Value,
}

impl Op<'_> {
    fn into_value(self) -> Value {
        let mut o = json!({
            "description": self.description,
            "operationId": self.id,
            "responses": self.responses,
            "tags": [self.gv.tag],
            "x-kubernetes-action": self.action,
            "x-kubernetes-group-version-kind": gvk(self.kind.0, self.kind.1, self.kind.2),
        });
        if self.params.as_array().is_some_and(|a| !a.is_empty()) {
            o["parameters"] = self.params;
        }
        if let Some(b) = self.body {
            o["requestBody"] = b;
        }
        o
    }
}

fn body(types: &[&str], schema: &Value, required: bool) -> Value {
    let mut b = json!({ "content": content(types, schema) });
    if required {
        b["required"] = true.into();
    }
    b
}

fn api_resources_path(gv: &GroupVersion) -> Value {
    json!({
        "get": {
            "description": "get available resources",
            "operationId": format!("get{}APIResources", gv.camel),
            "responses": responses(&["200"], JSON_YAML_PB, &schema_ref(&format!("{META}.APIResourceList"))),
            "tags": [gv.tag],
        },
    })
}

fn insert_op(paths: &mut Map<String, Value>, path: &str, method: &str, op: Value) {
    let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
    entry[method] = op;
}

fn set_path_params(paths: &mut Map<String, Value>, path: &str, params: Value) {
    if let Some(entry) = paths.get_mut(path) {
        entry["parameters"] = params;
    }
}

fn resource_paths(gv: &GroupVersion, r: &ResourceType, paths: &mut Map<String, Value>) {
    let ns = r.namespaced;
    let scope = if ns { "Namespaced" } else { "" };
    let c = &gv.camel;
    let kind = r.kind;
    let k = (gv.group.as_str(), gv.version.as_str(), kind);
    let ns_seg = if ns { "/namespaces/{namespace}" } else { "" };
    let collection = format!("{}{ns_seg}/{}", gv.base, r.plural);
    let item = format!("{collection}/{{name}}");
    let obj = schema_ref(&r.schema_name_of());
    let list = schema_ref(&list_schema_name(r));
    let status = schema_ref(&format!("{META}.Status"));
    let delete_options = schema_ref(&format!("{META}.DeleteOptions"));
    let patch = schema_ref(&format!("{META}.Patch"));
    let watch_event = schema_ref(&format!("{META}.WatchEvent"));
    let verb = |v: &str| r.verbs.contains(&v);
    let returns_deleted = RETURNS_DELETED_OBJECT.contains(&(r.group, r.plural));
    let deleted = if returns_deleted { &obj } else { &status };

    // Collection.
    if verb("list") {
        let op = Op {
            gv,
            id: format!("list{c}{scope}{kind}"),
            description: format!("list or watch objects of kind {kind}"),
            action: "list",
            kind: k,
            params: qs(LIST_PARAMS),
            body: None,
            responses: responses(&["200"], WATCHABLE, &list),
        };
        insert_op(paths, &collection, "get", op.into_value());
    }
    if verb("create") {
        let op = Op {
            gv,
            id: format!("create{c}{scope}{kind}"),
            description: format!("create a {kind}"),
            action: "post",
            kind: k,
            params: qs(WRITE_PARAMS),
            body: Some(body(&["*/*"], &obj, true)),
            responses: responses(&["200", "201", "202"], JSON_YAML_PB, &obj),
        };
        insert_op(paths, &collection, "post", op.into_value());
    }
    if verb("deletecollection") {
        let op = Op {
            gv,
            id: format!("delete{c}Collection{scope}{kind}"),
            description: format!("delete collection of {kind}"),
            action: "deletecollection",
            kind: k,
            params: qs(DELETE_COLLECTION_PARAMS),
            body: Some(body(&["*/*"], &delete_options, false)),
            responses: responses(&["200"], JSON_YAML_PB, &status),
        };
        insert_op(paths, &collection, "delete", op.into_value());
    }
    set_path_params(paths, &collection, path_params(None, ns, &[]));

    // Item.
    if verb("get") {
        let op = Op {
            gv,
            id: format!("read{c}{scope}{kind}"),
            description: format!("read the specified {kind}"),
            action: "get",
            kind: k,
            params: json!([]),
            body: None,
            responses: responses(&["200"], JSON_YAML_PB, &obj),
        };
        insert_op(paths, &item, "get", op.into_value());
    }
    if verb("update") {
        let op = Op {
            gv,
            id: format!("replace{c}{scope}{kind}"),
            description: format!("replace the specified {kind}"),
            action: "put",
            kind: k,
            params: qs(WRITE_PARAMS),
            body: Some(body(&["*/*"], &obj, true)),
            responses: responses(&["200", "201"], JSON_YAML_PB, &obj),
        };
        insert_op(paths, &item, "put", op.into_value());
    }
    if verb("patch") {
        let op = Op {
            gv,
            id: format!("patch{c}{scope}{kind}"),
            description: format!("partially update the specified {kind}"),
            action: "patch",
            kind: k,
            params: qs(PATCH_PARAMS),
            body: Some(body(PATCH_TYPES, &patch, true)),
            responses: responses(&["200", "201"], JSON_YAML_PB, &obj),
        };
        insert_op(paths, &item, "patch", op.into_value());
    }
    if verb("delete") {
        let op = Op {
            gv,
            id: format!("delete{c}{scope}{kind}"),
            description: format!("delete a {kind}"),
            action: "delete",
            kind: k,
            params: qs(DELETE_PARAMS),
            body: Some(body(&["*/*"], &delete_options, false)),
            responses: responses(&["200", "202"], JSON_YAML_PB, deleted),
        };
        insert_op(paths, &item, "delete", op.into_value());
    }
    set_path_params(paths, &item, path_params(Some(kind), ns, &[]));

    // Across namespaces.
    if ns && verb("list") {
        let path = format!("{}/{}", gv.base, r.plural);
        let op = Op {
            gv,
            id: format!("list{c}{kind}ForAllNamespaces"),
            description: format!("list or watch objects of kind {kind}"),
            action: "list",
            kind: k,
            params: json!([]),
            body: None,
            responses: responses(&["200"], WATCHABLE, &list),
        };
        insert_op(paths, &path, "get", op.into_value());
        set_path_params(paths, &path, path_params(None, false, LIST_PARAMS));
    }

    // Deprecated watch paths, kept as upstream serves them.
    if verb("watch") {
        let watch_list_desc = format!(
            "watch individual changes to a list of {kind}. deprecated: use the 'watch' parameter with a list operation instead."
        );
        let wcol = format!("{}/watch{ns_seg}/{}", gv.base, r.plural);
        let op = Op {
            gv,
            id: format!("watch{c}{scope}{kind}List"),
            description: watch_list_desc.clone(),
            action: "watchlist",
            kind: k,
            params: json!([]),
            body: None,
            responses: responses(&["200"], WATCHABLE, &watch_event),
        };
        insert_op(paths, &wcol, "get", op.into_value());
        set_path_params(paths, &wcol, path_params(None, ns, LIST_PARAMS));

        let witem = format!("{wcol}/{{name}}");
        let op = Op {
            gv,
            id: format!("watch{c}{scope}{kind}"),
            description: format!(
                "watch changes to an object of kind {kind}. deprecated: use the 'watch' parameter with a list operation instead, filtered to a single item with the 'fieldSelector' parameter."
            ),
            action: "watch",
            kind: k,
            params: json!([]),
            body: None,
            responses: responses(&["200"], WATCHABLE, &watch_event),
        };
        insert_op(paths, &witem, "get", op.into_value());
        set_path_params(paths, &witem, path_params(Some(kind), ns, LIST_PARAMS));

        if ns {
            let wall = format!("{}/watch/{}", gv.base, r.plural);
            let op = Op {
                gv,
                id: format!("watch{c}{kind}ListForAllNamespaces"),
                description: watch_list_desc,
                action: "watchlist",
                kind: k,
                params: json!([]),
                body: None,
                responses: responses(&["200"], WATCHABLE, &watch_event),
            };
            insert_op(paths, &wall, "get", op.into_value());
            set_path_params(paths, &wall, path_params(None, false, LIST_PARAMS));
        }
    }

    for sub in r.subresources {
        subresource_paths(gv, r, sub, &item, paths);
    }
}

fn subresource_paths(
    gv: &GroupVersion,
    r: &ResourceType,
    sub: &str,
    item: &str,
    paths: &mut Map<String, Value>,
) {
    let ns = r.namespaced;
    let scope = if ns { "Namespaced" } else { "" };
    let c = &gv.camel;
    let kind = r.kind;
    let k = (gv.group.as_str(), gv.version.as_str(), kind);
    let sub_camel = upper_first(sub);
    let path = format!("{item}/{sub}");
    let patch = schema_ref(&format!("{META}.Patch"));
    let obj = schema_ref(&r.schema_name_of());

    // get/put/patch of the object itself (status, ephemeralcontainers, resize) or of a
    // Scale (scale).
    let read_replace_patch =
        |paths: &mut Map<String, Value>, schema: &Value, sk: (&str, &str, &str)| {
            let ops = [
                ("get", "read", "read", "get", None, json!([]), vec!["200"]),
                (
                    "put",
                    "replace",
                    "replace",
                    "put",
                    Some(body(&["*/*"], schema, true)),
                    qs(WRITE_PARAMS),
                    vec!["200", "201"],
                ),
                (
                    "patch",
                    "patch",
                    "partially update",
                    "patch",
                    Some(body(PATCH_TYPES, &patch, true)),
                    qs(PATCH_PARAMS),
                    vec!["200", "201"],
                ),
            ];
            for (method, verb, what, action, b, params, codes) in ops {
                let op = Op {
                    gv,
                    id: format!("{verb}{c}{scope}{kind}{sub_camel}"),
                    description: format!("{what} {sub} of the specified {kind}"),
                    action,
                    kind: sk,
                    params,
                    body: b,
                    responses: responses(&codes, JSON_YAML_PB, schema),
                };
                insert_op(paths, &path, method, op.into_value());
            }
            set_path_params(paths, &path, path_params(Some(kind), ns, &[]));
        };

    // POST of another kind (binding, eviction, token).
    let create = |paths: &mut Map<String, Value>, schema: &Value, sk: (&str, &str, &str)| {
        let op = Op {
            gv,
            id: format!("create{c}{scope}{kind}{sub_camel}"),
            description: format!("create {sub} of a {kind}"),
            action: "post",
            kind: sk,
            params: qs(WRITE_PARAMS),
            body: Some(body(&["*/*"], schema, true)),
            responses: responses(&["200", "201", "202"], JSON_YAML_PB, schema),
        };
        insert_op(paths, &path, "post", op.into_value());
        set_path_params(paths, &path, path_params(Some(sk.2), ns, &[]));
    };

    // connect operations (exec, attach, portforward, proxy).
    let connect = |paths: &mut Map<String, Value>,
                   path: &str,
                   methods: &[&str],
                   options: &str,
                   params: Value,
                   suffix: &str| {
        for m in methods {
            let op = Op {
                gv,
                id: format!(
                    "connect{c}{}{scope}{kind}{sub_camel}{suffix}",
                    upper_first(m)
                ),
                description: format!("connect {} requests to {sub} of {kind}", m.to_uppercase()),
                action: "connect",
                kind: ("", "v1", options),
                params: json!([]),
                body: None,
                responses: json!({
                    "200": { "content": { "*/*": { "schema": { "type": "string" } } }, "description": "OK" },
                    "401": { "description": "Unauthorized" },
                }),
            };
            insert_op(paths, path, m, op.into_value());
        }
        let mut all = vec![param(
            "path",
            "name",
            "string",
            &format!("name of the {options}"),
        )];
        if ns {
            all.push(namespace_param());
        }
        if let Some(a) = params.as_array() {
            all.extend(a.iter().cloned());
        }
        set_path_params(paths, path, Value::Array(all));
    };
    let bool_q = |name: &str, d: &str| param("query", name, "boolean", d);
    let str_q = |name: &str, d: &str| param("query", name, "string", d);
    let stream_params = |with_command: bool| {
        let mut v = Vec::new();
        if with_command {
            v.push(str_q("command", "Command is the remote command to execute. argv array. Not executed within a shell."));
        }
        v.push(str_q("container", "The container in which to run the command (or to attach to). Defaults to the only container if there is only one."));
        v.push(bool_q(
            "stderr",
            "Redirect the standard error stream of the container for this call.",
        ));
        v.push(bool_q(
            "stdin",
            "Redirect the standard input stream of the container for this call.",
        ));
        v.push(bool_q(
            "stdout",
            "Redirect the standard output stream of the container for this call.",
        ));
        v.push(bool_q("tty", "Allocate a terminal for this call."));
        Value::Array(v)
    };
    const PROXY_METHODS: &[&str] = &["delete", "get", "head", "options", "patch", "post", "put"];

    match sub {
        "status" | "ephemeralcontainers" => read_replace_patch(paths, &obj, k),
        "scale" => read_replace_patch(
            paths,
            &schema_ref("io.k8s.api.autoscaling.v1.Scale"),
            ("autoscaling", "v1", "Scale"),
        ),
        "finalize" => {
            let op = Op {
                gv,
                id: format!("replace{c}{scope}{kind}Finalize"),
                description: format!("replace finalize of the specified {kind}"),
                action: "put",
                kind: k,
                params: qs(WRITE_PARAMS),
                body: Some(body(&["*/*"], &obj, true)),
                responses: responses(&["200", "201"], JSON_YAML_PB, &obj),
            };
            insert_op(paths, &path, "put", op.into_value());
            set_path_params(paths, &path, path_params(Some(kind), ns, &[]));
        }
        "binding" => create(
            paths,
            &schema_ref("io.k8s.api.core.v1.Binding"),
            ("", "v1", "Binding"),
        ),
        "eviction" => create(
            paths,
            &schema_ref("io.k8s.api.policy.v1.Eviction"),
            ("policy", "v1", "Eviction"),
        ),
        "token" => create(
            paths,
            &schema_ref("io.k8s.api.authentication.v1.TokenRequest"),
            ("authentication.k8s.io", "v1", "TokenRequest"),
        ),
        "log" => {
            let op = Op {
                gv,
                id: format!("read{c}{scope}{kind}Log"),
                description: format!("read log of the specified {kind}"),
                action: "get",
                kind: k,
                params: json!([]),
                body: None,
                responses: responses(
                    &["200"],
                    &[
                        "application/json",
                        "application/vnd.kubernetes.protobuf",
                        "application/yaml",
                        "text/plain",
                    ],
                    &json!({ "type": "string" }),
                ),
            };
            insert_op(paths, &path, "get", op.into_value());
            let mut params = vec![
                param("path", "name", "string", &format!("name of the {kind}")),
                namespace_param(),
            ];
            params.extend([
                str_q("container", "The container for which to stream logs. Defaults to the only container if there is one container in the pod."),
                bool_q("follow", "Follow the log stream of the pod. Defaults to false."),
                bool_q("insecureSkipTLSVerifyBackend", "Skip verifying the serving certificate of the backend (kubelet) when fetching logs."),
                param("query", "limitBytes", "integer", "If set, the number of bytes to read from the server before terminating the log output."),
                str_q("pretty", "If 'true', the output is pretty-printed."),
                bool_q("previous", "Return the logs of the previous terminated container. Defaults to false."),
                param("query", "sinceSeconds", "integer", "A relative time in seconds before the current time from which to show logs."),
                str_q("stream", "The log stream to return: All (default), Stdout or Stderr."),
                param("query", "tailLines", "integer", "If set, the number of lines from the end of the logs to show."),
                bool_q("timestamps", "If true, add an RFC3339 timestamp at the beginning of every line of log output. Defaults to false."),
            ]);
            set_path_params(paths, &path, Value::Array(params));
        }
        "exec" => connect(
            paths,
            &path,
            &["get", "post"],
            "PodExecOptions",
            stream_params(true),
            "",
        ),
        "attach" => connect(
            paths,
            &path,
            &["get", "post"],
            "PodAttachOptions",
            stream_params(false),
            "",
        ),
        "portforward" => connect(
            paths,
            &path,
            &["get", "post"],
            "PodPortForwardOptions",
            json!([param(
                "query",
                "ports",
                "integer",
                "List of ports to forward."
            )]),
            "",
        ),
        "proxy" => {
            let options = format!("{kind}ProxyOptions");
            connect(
                paths,
                &path,
                PROXY_METHODS,
                &options,
                json!([str_q(
                    "path",
                    &format!(
                        "Path is the URL path to use for the current proxy request to the {}.",
                        kind.to_lowercase()
                    )
                )]),
                "",
            );
            let with_path = format!("{path}/{{path}}");
            connect(
                paths,
                &with_path,
                PROXY_METHODS,
                &options,
                json!([param("path", "path", "string", "path to the resource")]),
                "WithPath",
            );
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn collect_refs(v: &Value, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(o) => {
                if let Some(Value::String(r)) = o.get("$ref") {
                    out.insert(r.clone());
                }
                o.values().for_each(|c| collect_refs(c, out));
            }
            Value::Array(a) => a.iter().for_each(|c| collect_refs(c, out)),
            _ => {}
        }
    }

    fn schema<'a>(doc: &'a Value, name: &str) -> &'a Value {
        doc["components"]["schemas"]
            .get(name)
            .unwrap_or_else(|| panic!("schema {name} missing"))
    }

    #[test]
    fn apps_v1_deployment_patch_operation() {
        let doc = document("apis/apps/v1").unwrap();
        assert_eq!(doc["openapi"], "3.0.0");
        assert_eq!(doc["info"]["title"], "Kubernetes");
        let p = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"];
        let patch = &p["patch"];
        assert_eq!(patch["operationId"], "patchAppsV1NamespacedDeployment");
        assert_eq!(patch["x-kubernetes-action"], "patch");
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "apps", "version": "v1", "kind": "Deployment"})
        );
        let names: Vec<&str> = patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["dryRun", "fieldManager", "fieldValidation", "force"]
        );
        for t in PATCH_TYPES {
            assert!(patch["requestBody"]["content"].get(*t).is_some(), "{t}");
        }
        assert_eq!(p["get"]["operationId"], "readAppsV1NamespacedDeployment");
        assert_eq!(p["put"]["operationId"], "replaceAppsV1NamespacedDeployment");
        assert_eq!(
            p["delete"]["operationId"],
            "deleteAppsV1NamespacedDeployment"
        );
        let pp: Vec<&str> = p["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(pp, ["name", "namespace", "pretty"]);
        let post = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"]["post"];
        assert_eq!(post["operationId"], "createAppsV1NamespacedDeployment");
        let names: Vec<&str> = post["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["dryRun", "fieldManager", "fieldValidation"]);
        assert_eq!(
            doc["paths"]["/apis/apps/v1/deployments"]["get"]["operationId"],
            "listAppsV1DeploymentForAllNamespaces"
        );
        let scale =
            &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]["patch"];
        assert_eq!(scale["operationId"], "patchAppsV1NamespacedDeploymentScale");
        assert_eq!(scale["x-kubernetes-group-version-kind"]["kind"], "Scale");
        let status =
            &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status"]["get"];
        assert_eq!(
            status["operationId"],
            "readAppsV1NamespacedDeploymentStatus"
        );
        assert!(doc["paths"].get("/apis/apps/v1/").is_some());
    }

    #[test]
    fn every_kind_has_a_patch_with_field_validation() {
        // What kubectl's apply checks before using server-side field validation.
        for path in paths() {
            let doc = document(&path).unwrap();
            let (group, version) = parse_gv_path(&path).unwrap();
            for r in registry::resources_in(group, version) {
                let method = if r.is_review() { "post" } else { "patch" };
                let found = doc["paths"].as_object().unwrap().values().any(|p| {
                    let op = &p[method];
                    if r.is_review() {
                        return op["x-kubernetes-group-version-kind"]
                            == gvk(r.group, r.version, r.kind);
                    }
                    op["x-kubernetes-group-version-kind"] == gvk(r.group, r.version, r.kind)
                        && op["parameters"]
                            .as_array()
                            .is_some_and(|a| a.iter().any(|x| x["name"] == "fieldValidation"))
                        && op["requestBody"]["content"]
                            .get("application/strategic-merge-patch+json")
                            .is_some()
                });
                assert!(found, "{path}: no PATCH for {}", r.kind);
                let s = schema(&doc, &r.schema_name_of());
                assert_eq!(
                    s["x-kubernetes-group-version-kind"],
                    json!([gvk(r.group, r.version, r.kind)])
                );
                assert!(
                    s["description"].as_str().is_some_and(|d| !d.is_empty()),
                    "{}",
                    r.kind
                );
                if r.is_review() {
                    continue;
                }
                let list = schema(&doc, &list_schema_name(r));
                assert_eq!(
                    list["x-kubernetes-group-version-kind"][0]["kind"],
                    r.list_kind
                );
            }
        }
    }

    #[test]
    fn deployment_schema() {
        let doc = document("apis/apps/v1").unwrap();
        let d = schema(&doc, "io.k8s.api.apps.v1.Deployment");
        assert!(d["description"].as_str().unwrap().contains("Deployment"));
        assert_eq!(
            d["x-kubernetes-group-version-kind"],
            json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
        );
        // Upstream has no required on kinds (k8s-openapi says metadata).
        assert!(d.get("required").is_none(), "{}", d["required"]);
        let spec = &d["properties"]["spec"];
        assert_eq!(
            spec["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec"
        );
        assert!(spec["description"].is_string());
        assert!(spec.get("$ref").is_none());
        let ds = schema(&doc, "io.k8s.api.apps.v1.DeploymentSpec");
        assert_eq!(ds["required"], json!(["selector", "template"]));
        assert_eq!(
            ds["properties"]["strategy"]["x-kubernetes-patch-strategy"],
            "retainKeys"
        );
        // Pod template reaches core types.
        let c = schema(&doc, "io.k8s.api.core.v1.PodSpec");
        assert_eq!(
            c["properties"]["containers"]["x-kubernetes-patch-merge-key"],
            "name"
        );
        for meta in [
            "Status",
            "DeleteOptions",
            "Patch",
            "WatchEvent",
            "ListMeta",
            "ObjectMeta",
            "APIResourceList",
        ] {
            schema(&doc, &format!("{META}.{meta}"));
        }
        schema(&doc, "io.k8s.api.autoscaling.v1.Scale");
        let we = schema(&doc, &format!("{META}.WatchEvent"));
        assert!(
            we["x-kubernetes-group-version-kind"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["group"] == "apps")
        );
    }

    #[test]
    fn refs_resolve_within_each_document() {
        for path in paths() {
            let doc = document(&path).unwrap();
            let mut refs = BTreeSet::new();
            collect_refs(&doc, &mut refs);
            assert!(!refs.is_empty());
            for r in refs {
                let name = r
                    .strip_prefix("#/components/schemas/")
                    .unwrap_or_else(|| panic!("{path}: foreign ref {r}"));
                assert!(
                    doc["components"]["schemas"].get(name).is_some(),
                    "{path}: dangling {r}"
                );
            }
        }
    }

    #[test]
    fn no_ref_has_siblings() {
        fn walk(v: &Value, at: &str) {
            match v {
                Value::Object(o) => {
                    if o.contains_key("$ref") {
                        assert_eq!(o.len(), 1, "{at}: $ref with siblings");
                    }
                    for (k, c) in o {
                        match (k.as_str(), c) {
                            // Property names are not keywords (JSONSchemaProps has `$ref`).
                            ("properties", Value::Object(props)) => {
                                for (name, p) in props {
                                    walk(p, &format!("{at}/properties/{name}"));
                                }
                            }
                            _ => walk(c, &format!("{at}/{k}")),
                        }
                    }
                }
                Value::Array(a) => a.iter().for_each(|c| walk(c, at)),
                _ => {}
            }
        }
        for path in paths() {
            walk(&document(&path).unwrap(), &path);
        }
    }

    #[test]
    fn core_v1_pod() {
        let doc = document("api/v1").unwrap();
        let spec = schema(&doc, "io.k8s.api.core.v1.PodSpec");
        let containers = &spec["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(containers["x-kubernetes-list-type"], "map");
        assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
        assert_eq!(
            containers["items"]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.Container"
        );
        assert!(containers["description"].is_string());
        assert_eq!(spec["required"], json!(["containers"]));
        assert_eq!(
            spec["properties"]["volumes"]["x-kubernetes-patch-strategy"],
            "merge,retainKeys"
        );
        let c = schema(&doc, "io.k8s.api.core.v1.Container");
        assert_eq!(c["required"], json!(["name"]));
        assert_eq!(
            c["properties"]["ports"]["x-kubernetes-list-map-keys"],
            json!(["containerPort", "protocol"])
        );
        assert_eq!(
            c["properties"]["env"]["x-kubernetes-patch-merge-key"],
            "name"
        );
        assert_eq!(
            c["properties"]["volumeMounts"]["x-kubernetes-patch-merge-key"],
            "mountPath"
        );
        let om = schema(&doc, &format!("{META}.ObjectMeta"));
        assert_eq!(
            om["properties"]["ownerReferences"]["x-kubernetes-patch-merge-key"],
            "uid"
        );
        assert_eq!(
            om["properties"]["finalizers"]["x-kubernetes-list-type"],
            "set"
        );
        assert_eq!(
            schema(&doc, "io.k8s.api.core.v1.LocalObjectReference")["x-kubernetes-map-type"],
            "atomic"
        );
        let svc = schema(&doc, "io.k8s.api.core.v1.ServiceSpec");
        assert_eq!(
            svc["properties"]["ports"]["x-kubernetes-list-map-keys"],
            json!(["port", "protocol"])
        );
        let pod = schema(&doc, "io.k8s.api.core.v1.Pod");
        assert_eq!(
            pod["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "Pod", "version": "v1"}])
        );

        // Scalars shaped as upstream.
        let qty = schema(&doc, "io.k8s.apimachinery.pkg.api.resource.Quantity");
        assert_eq!(
            qty["oneOf"],
            json!([{"type": "string"}, {"type": "number"}])
        );
        let rp = &spec["properties"]["restartPolicy"];
        assert_eq!(rp["enum"], json!(["Always", "Never", "OnFailure"]));
        assert!(
            rp["description"]
                .as_str()
                .unwrap()
                .contains("Possible enum values:\n - `\"Always\"`")
        );
        let pull = &c["properties"]["imagePullPolicy"]["description"];
        assert!(
            pull.as_str()
                .unwrap()
                .contains(" - `\"Always\"` means that kubelet always attempts"),
            "{pull}"
        );
        let ios = schema(&doc, "io.k8s.apimachinery.pkg.util.intstr.IntOrString");
        assert_eq!(ios["format"], "int-or-string");
        assert_eq!(ios["x-kubernetes-int-or-string"], true);
        let time = schema(&doc, &format!("{META}.Time"));
        assert_eq!(
            (time["type"].as_str(), time["format"].as_str()),
            (Some("string"), Some("date-time"))
        );

        // Pod paths and subresources.
        let paths = &doc["paths"];
        assert_eq!(
            paths["/api/v1/pods"]["get"]["operationId"],
            "listCoreV1PodForAllNamespaces"
        );
        let item = &paths["/api/v1/namespaces/{namespace}/pods/{name}"];
        assert_eq!(item["get"]["operationId"], "readCoreV1NamespacedPod");
        assert_eq!(
            item["delete"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.Pod"
        );
        assert_eq!(
            paths["/api/v1/namespaces/{namespace}/pods/{name}/ephemeralcontainers"]["patch"]["operationId"],
            "patchCoreV1NamespacedPodEphemeralcontainers"
        );
        assert_eq!(
            paths["/api/v1/namespaces/{namespace}/pods/{name}/log"]["get"]["operationId"],
            "readCoreV1NamespacedPodLog"
        );
        assert_eq!(
            paths["/api/v1/namespaces/{namespace}/pods/{name}/exec"]["get"]["operationId"],
            "connectCoreV1GetNamespacedPodExec"
        );
        assert_eq!(
            paths["/api/v1/namespaces/{namespace}/pods/{name}/eviction"]["post"]["operationId"],
            "createCoreV1NamespacedPodEviction"
        );
        assert_eq!(
            paths["/api/v1/nodes/{name}"]["patch"]["operationId"],
            "patchCoreV1Node"
        );
        assert_eq!(
            paths["/api/v1/nodes"]["delete"]["operationId"],
            "deleteCoreV1CollectionNode"
        );
        assert_eq!(
            paths["/api/v1/namespaces/{name}/finalize"]["put"]["operationId"],
            "replaceCoreV1NamespaceFinalize"
        );
        assert!(
            paths["/api/v1/namespaces"].get("delete").is_none(),
            "namespaces have no deletecollection"
        );
        assert_eq!(
            paths["/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"]["post"]["operationId"],
            "createCoreV1NamespacedServiceAccountToken"
        );
        schema(&doc, "io.k8s.api.authentication.v1.TokenRequest");
        schema(&doc, "io.k8s.api.policy.v1.Eviction");
        schema(&doc, "io.k8s.api.core.v1.Binding");
    }

    #[test]
    fn autoscaling_v2_hpa_behavior_explains() {
        let doc = document("apis/autoscaling/v2").unwrap();
        let hpa = schema(&doc, "io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler");
        assert_eq!(hpa["x-kubernetes-group-version-kind"][0]["version"], "v2");
        let spec = schema(
            &doc,
            "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerSpec",
        );
        let behavior = &spec["properties"]["behavior"];
        assert!(behavior["description"].is_string());
        assert_eq!(
            behavior["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerBehavior"
        );
        let b = schema(
            &doc,
            "io.k8s.api.autoscaling.v2.HorizontalPodAutoscalerBehavior",
        );
        assert!(b["properties"]["scaleUp"]["description"].is_string());
        assert_eq!(
            doc["paths"]["/apis/autoscaling/v2/namespaces/{namespace}/horizontalpodautoscalers/{name}"]
                ["patch"]["operationId"],
            "patchAutoscalingV2NamespacedHorizontalPodAutoscaler"
        );
        assert!(document("apis/autoscaling/v1").is_some());
    }

    #[test]
    fn autoscaling_v2beta2_hpa_is_v2_under_upstream_names() {
        assert_eq!(
            paths()
                .iter()
                .filter(|p| p.starts_with("apis/autoscaling/"))
                .collect::<Vec<_>>(),
            [
                "apis/autoscaling/v2",
                "apis/autoscaling/v1",
                "apis/autoscaling/v2beta2"
            ]
        );
        let doc = document("apis/autoscaling/v2beta2").unwrap();
        let names: Vec<&String> = doc["components"]["schemas"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert!(
            !names
                .iter()
                .any(|n| n.starts_with("io.k8s.api.autoscaling.v2.")),
            "{names:?}"
        );
        let mut refs = BTreeSet::new();
        collect_refs(&doc, &mut refs);
        assert!(
            !refs.iter().any(|r| r.contains("autoscaling.v2.")),
            "{refs:?}"
        );
        let hpa = schema(
            &doc,
            "io.k8s.api.autoscaling.v2beta2.HorizontalPodAutoscaler",
        );
        assert_eq!(
            hpa["x-kubernetes-group-version-kind"],
            json!([{"group": "autoscaling", "kind": "HorizontalPodAutoscaler", "version": "v2beta2"}])
        );
        let list = schema(
            &doc,
            "io.k8s.api.autoscaling.v2beta2.HorizontalPodAutoscalerList",
        );
        assert_eq!(
            list["x-kubernetes-group-version-kind"][0]["version"],
            "v2beta2"
        );
        let spec = schema(
            &doc,
            "io.k8s.api.autoscaling.v2beta2.HorizontalPodAutoscalerSpec",
        );
        let behavior = &spec["properties"]["behavior"];
        assert!(behavior["description"].as_str().unwrap().starts_with(
            "behavior configures the scaling behavior of the target in both Up and Down directions"
        ));
        assert_eq!(
            behavior["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.autoscaling.v2beta2.HorizontalPodAutoscalerBehavior"
        );
        // Upstream's v2beta2 had no list-type markers (v2's `metrics` is atomic).
        assert!(
            spec["properties"]["metrics"]
                .get("x-kubernetes-list-type")
                .is_none()
        );
        let rules = schema(&doc, "io.k8s.api.autoscaling.v2beta2.HPAScalingRules");
        assert!(rules["properties"].get("tolerance").is_none());
        assert!(rules["properties"].get("selectPolicy").is_some());
        assert!(!rules["description"].as_str().unwrap().contains("tolerance"));
        let op = &doc["paths"]["/apis/autoscaling/v2beta2/namespaces/{namespace}/horizontalpodautoscalers/{name}"]
            ["get"];
        assert_eq!(
            op["operationId"],
            "readAutoscalingV2beta2NamespacedHorizontalPodAutoscaler"
        );
        assert_eq!(op["x-kubernetes-group-version-kind"]["version"], "v2beta2");
        // The v2 document is untouched (tolerance, list types).
        let v2 = document("apis/autoscaling/v2").unwrap();
        let rules = schema(&v2, "io.k8s.api.autoscaling.v2.HPAScalingRules");
        assert!(rules["properties"].get("tolerance").is_some());
        assert_eq!(
            rules["properties"]["policies"]["x-kubernetes-list-type"],
            "atomic"
        );
    }

    #[test]
    fn operation_ids_of_dotted_groups() {
        let doc = document("apis/rbac.authorization.k8s.io/v1").unwrap();
        let op = &doc["paths"]["/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"]["patch"];
        assert_eq!(op["operationId"], "patchRbacAuthorizationV1ClusterRole");
        assert_eq!(op["tags"], json!(["rbacAuthorization_v1"]));
        let doc = document("apis/networking.k8s.io/v1").unwrap();
        assert!(doc["paths"]["/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses/{name}/status"]["patch"].is_object());
    }

    #[test]
    fn unknown_paths() {
        assert!(document("apis/apps/v9").is_none());
        assert!(document("apis/nope/v1").is_none());
        assert!(document("api/v2").is_none());
        assert!(document("apis/apps").is_none());
        assert!(document("").is_none());
        assert!(document("/api/v1/").is_some());
    }

    #[test]
    fn index_lists_every_group_version() {
        let all = OpenApiV3::build();
        let idx: Value = serde_json::from_slice(&all.index).unwrap();
        let listed: BTreeSet<&str> = idx["paths"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        for g in registry::groups() {
            for v in &g.versions {
                let p = gv_path(g.name, v);
                assert!(listed.contains(p.as_str()), "{p}");
                let url = idx["paths"][&p]["serverRelativeURL"].as_str().unwrap();
                let r = all.get(&p).unwrap();
                assert_eq!(url, format!("/openapi/v3/{p}?hash={}", r.hash));
                assert_eq!(r.hash.len(), 128);
            }
        }
        assert_eq!(listed.len(), paths().len());
        assert_eq!(cached().index, all.index);
        assert!(cached().get("/apis/apps/v1").is_some() && cached().get("apis/apps/v2").is_none());
        assert!(
            listed.contains("api/v1")
                && listed.contains("apis/apps/v1")
                && listed.contains("apis/autoscaling/v2")
        );
    }

    #[test]
    fn generation_is_deterministic() {
        let a = OpenApiV3::build();
        let b = OpenApiV3::build();
        assert_eq!(a.index, b.index);
        for (p, r) in &a.documents {
            assert_eq!(r.hash, b.documents[p].hash, "{p}");
            assert_eq!(r.hash, hash(&r.bytes));
        }
    }

    #[test]
    fn semantics_table_applies() {
        // Every table entry for a schema present in some document lands on a property
        // (catches typos and fields k8s-openapi lacks).
        let mut all = Map::new();
        for p in paths() {
            let doc = document(&p).unwrap();
            for (k, v) in doc["components"]["schemas"].as_object().unwrap() {
                all.insert(k.clone(), v.clone());
            }
        }
        let mut applied = 0;
        for (schema, fields) in FIELD_SEMANTICS {
            let Some(s) = all.get(*schema) else { continue };
            for f in *fields {
                let p = s["properties"]
                    .get(f.name)
                    .unwrap_or_else(|| panic!("{schema}.{} missing", f.name));
                if !f.list_type.is_empty() {
                    assert_eq!(p["x-kubernetes-list-type"], f.list_type);
                }
                applied += 1;
            }
        }
        assert!(applied > 150, "{applied}");
        let mut enums = 0;
        for (schema, fields) in ENUMS {
            let Some(s) = all.get(*schema) else { continue };
            for (field, on_items, values) in *fields {
                let p = s["properties"]
                    .get(*field)
                    .unwrap_or_else(|| panic!("{schema}.{field} missing"));
                let e = if *on_items {
                    &p["items"]["enum"]
                } else {
                    &p["enum"]
                };
                assert_eq!(
                    e.as_array().map(Vec::len),
                    Some(values.len()),
                    "{schema}.{field}"
                );
                enums += 1;
            }
        }
        assert!(enums > 60, "{enums}");
        assert_eq!(
            field_semantics("io.k8s.api.core.v1.PodSpec", "containers")
                .unwrap()
                .patch_merge_key,
            "name"
        );
        assert!(is_atomic_struct(
            "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector"
        ));
    }

    #[test]
    fn timing() {
        let start = std::time::Instant::now();
        let all = OpenApiV3::build();
        let elapsed = start.elapsed();
        let bytes: usize = all.documents.values().map(|r| r.bytes.len()).sum();
        println!(
            "openapi v3: {} documents, {} KiB, generated+serialized+hashed in {:?}",
            all.documents.len(),
            bytes / 1024,
            elapsed
        );
        for (p, r) in &all.documents {
            println!("  {p}: {} KiB", r.bytes.len() / 1024);
        }
    }
}
