//! The Swagger 2.0 document of the whole API, as upstream serves it at `/openapi/v2`.
//!
//! kubectl 1.27 and 1.28 read `/openapi/v2` (protobuf, gnostic's `openapi.v2.Document`)
//! for client-side validation, `explain` and the strategic merge patch metadata of
//! `apply`; without it they fail with `the server could not find the requested resource`.
//!
//! The document is derived from the v3 group-version documents ([`super::document`]), so
//! both say the same thing:
//! - `paths`: every path of every group-version; `parameters` flattened (`schema.type` →
//!   `type`), `requestBody` → a `body` parameter plus `consumes`, response `content` →
//!   `schema` plus `produces`, `schemes: [https]`.
//! - `definitions`: `components.schemas` of all documents, merged by name (their
//!   `x-kubernetes-group-version-kind` lists united), `#/components/schemas/X` →
//!   `#/definitions/X`, `allOf: [{$ref}]` with siblings → `$ref` with siblings (v2's form),
//!   and the v3-only `oneOf`s turned into upstream's v2 scalars: `IntOrString` is
//!   `type: string, format: int-or-string`, `Quantity` is `type: string`.
//!
//! [`protobuf`] encodes that document as gnostic's protobuf ([`proto`]); [`cached`] keeps
//! both encodings for the life of the process.
//!
//! Not reproduced: upstream's shared `parameters` section (parameters are inlined in every
//! operation, which gnostic and kubectl accept alike), the `/api/`, `/apis/`, `/version/`
//! and `/logs/` paths, `ETag`s, gzip, `406 Not Acceptable` (an `Accept` naming neither
//! encoding gets JSON), and the exact YAML text of vendor extensions (written as JSON,
//! which is YAML; readers parse it to the same values).

pub mod proto;

use serde_json::{Map, Value, json};

use super::KUBERNETES_VERSION;

/// The Content-Type of the protobuf encoding. Clients ask for it as
/// [`PROTOBUF_MEDIA_TYPE_ACCEPT`] (client-go's `openAPIV2mimePb`), but upstream answers
/// with this spelling whichever was asked: Go's `mime.ParseMediaType` rejects the `@`
/// (`mime: unexpected content after media subtype`), failing the request in client-go.
pub const PROTOBUF_MEDIA_TYPE: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
/// What client-go's `OpenAPISchema` puts in `Accept`.
pub const PROTOBUF_MEDIA_TYPE_ACCEPT: &str =
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

const GVK: &str = "x-kubernetes-group-version-kind";
const V3_REF: &str = "#/components/schemas/";
const V2_REF: &str = "#/definitions/";

/// The whole API as one Swagger 2.0 document.
pub fn document() -> Value {
    let mut paths = Map::new();
    let mut defs = Map::new();
    for gv in super::paths() {
        let Some(doc) = super::document(&gv) else {
            continue;
        };
        let Value::Object(mut doc) = doc else {
            continue;
        };
        if let Some(Value::Object(p)) = doc.remove("paths") {
            for (path, item) in p {
                paths.insert(path, path_item(&item));
            }
        }
        let schemas = doc
            .get_mut("components")
            .and_then(|c| c.get_mut("schemas"))
            .map(Value::take);
        if let Some(Value::Object(schemas)) = schemas {
            for (name, schema) in schemas {
                merge_definition(&mut defs, name, schema);
            }
        }
    }
    let defs: Map<String, Value> = defs.into_iter().map(|(n, s)| (n, schema(&s))).collect();
    let mut doc = json!({
        "swagger": "2.0",
        "info": { "title": "Kubernetes", "version": KUBERNETES_VERSION },
        "paths": paths,
        "definitions": defs,
        "securityDefinitions": {
            "BearerToken": {
                "description": "Bearer Token authentication",
                "in": "header",
                "name": "authorization",
                "type": "apiKey",
            },
        },
        "security": [{ "BearerToken": [] }],
    });
    doc.sort_all_objects();
    doc
}

/// [`document`] in gnostic's `openapi.v2.Document` protobuf encoding.
pub fn protobuf() -> Vec<u8> {
    proto::encode_document(&document())
}

/// Both encodings, rendered once.
#[derive(Debug, Clone)]
pub struct OpenApiV2 {
    /// Compact JSON (`application/json`).
    pub json: Vec<u8>,
    /// [`PROTOBUF_MEDIA_TYPE`].
    pub protobuf: Vec<u8>,
}

impl OpenApiV2 {
    /// Generates the document and encodes it both ways.
    pub fn build() -> OpenApiV2 {
        let doc = document();
        OpenApiV2 {
            // A `Value` always serializes; an empty body would only mean a bug here.
            json: serde_json::to_vec(&doc).unwrap_or_default(),
            protobuf: proto::encode_document(&doc),
        }
    }
}

/// Both encodings, rendered on first use and kept for the life of the process.
pub fn cached() -> &'static OpenApiV2 {
    static CACHE: std::sync::LazyLock<OpenApiV2> = std::sync::LazyLock::new(OpenApiV2::build);
    &CACHE
}

/// Whether an `Accept` header prefers the protobuf encoding over JSON. Media ranges are
/// taken by `q` (highest first), then in order; JSON is the answer when neither is named.
pub fn wants_protobuf(accept: &str) -> bool {
    let mut ranges: Vec<(f32, usize, &str)> = Vec::new();
    for (i, part) in accept.split(',').enumerate() {
        let mut fields = part.split(';');
        let media = fields.next().unwrap_or_default().trim();
        let q = fields
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|q| q.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if q > 0.0 {
            ranges.push((q, i, media));
        }
    }
    ranges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for (_, _, media) in ranges {
        let m = media.to_ascii_lowercase();
        if m == PROTOBUF_MEDIA_TYPE || m == PROTOBUF_MEDIA_TYPE_ACCEPT {
            return true;
        }
        if matches!(m.as_str(), "application/json" | "application/*" | "*/*") {
            return false;
        }
    }
    false
}

// ---------------------------------------------------------------------------------
// Definitions.

/// Adds a schema from one group-version document. The same name in several documents
/// is the same Go type; only the kinds it is served as may differ (a PVC is a root kind
/// in `api/v1` and a nested one in `apps/v1`), so their gvk lists are united.
fn merge_definition(defs: &mut Map<String, Value>, name: String, schema: Value) {
    let Some(existing) = defs.get_mut(&name) else {
        defs.insert(name, schema);
        return;
    };
    let Some(Value::Array(add)) = schema.get(GVK) else {
        return;
    };
    let Some(obj) = existing.as_object_mut() else {
        return;
    };
    let list = obj.entry(GVK).or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = list {
        for g in add {
            if !list.contains(g) {
                list.push(g.clone());
            }
        }
    }
}

/// One v3 schema in v2's form (recursively).
fn schema(v: &Value) -> Value {
    let Value::Object(o) = v else {
        return v.clone();
    };
    if o.contains_key("oneOf") {
        return scalar_union(o);
    }
    let mut out = Map::new();
    // v3 wraps a `$ref` that has siblings in a one-element `allOf`; v2 keeps the
    // siblings (description, patch extensions) beside the `$ref` itself.
    if let Some(Value::Array(all)) = o.get("allOf")
        && let [Value::Object(only)] = all.as_slice()
        && let Some(Value::String(r)) = only.get("$ref")
        && only.len() == 1
    {
        out.insert("$ref".into(), v2_ref(r).into());
    }
    for (k, child) in o {
        let converted = match k.as_str() {
            "allOf" if out.contains_key("$ref") => continue,
            "$ref" => match child {
                Value::String(r) => v2_ref(r).into(),
                other => other.clone(),
            },
            "properties" => match child {
                Value::Object(props) => Value::Object(
                    props
                        .iter()
                        .map(|(name, s)| (name.clone(), schema(s)))
                        .collect(),
                ),
                other => other.clone(),
            },
            "items" | "additionalProperties" | "not" => match child {
                Value::Array(a) => Value::Array(a.iter().map(schema).collect()),
                other => schema(other),
            },
            "allOf" | "anyOf" => match child {
                Value::Array(a) => Value::Array(a.iter().map(schema).collect()),
                other => other.clone(),
            },
            // No v2 equivalent.
            "nullable" => continue,
            _ => child.clone(),
        };
        out.insert(k.clone(), converted);
    }
    Value::Object(out)
}

/// A v3 `oneOf` of scalars (Quantity, IntOrString) as upstream's v2 writes it: one
/// `type: string`, with `format: int-or-string` (and no `x-kubernetes-int-or-string`)
/// for IntOrString.
fn scalar_union(o: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    for (k, v) in o {
        match k.as_str() {
            "oneOf" | "anyOf" | "type" | "nullable" | "x-kubernetes-int-or-string" => {}
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if o.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        out.insert("format".into(), "int-or-string".into());
    }
    out.insert("type".into(), "string".into());
    Value::Object(out)
}

fn v2_ref(r: &str) -> String {
    match r.strip_prefix(V3_REF) {
        Some(name) => format!("{V2_REF}{name}"),
        None => r.to_string(),
    }
}

// ---------------------------------------------------------------------------------
// Paths and operations.

/// Upstream's order of media types in `consumes`/`produces`; the v3 documents have them
/// sorted by name.
const MEDIA_ORDER: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
];

fn push_media(list: &mut Vec<String>, content: Option<&Value>) {
    let Some(Value::Object(c)) = content else {
        return;
    };
    for media in c.keys() {
        if !list.contains(media) {
            list.push(media.clone());
        }
    }
}

fn order_media(mut list: Vec<String>) -> Vec<String> {
    let rank = |m: &String| {
        MEDIA_ORDER
            .iter()
            .position(|x| x == m)
            .unwrap_or(MEDIA_ORDER.len())
    };
    list.sort_by_key(rank);
    list
}

fn path_item(item: &Value) -> Value {
    let Value::Object(item) = item else {
        return item.clone();
    };
    let mut out = Map::new();
    for (k, v) in item {
        let converted = match k.as_str() {
            "get" | "put" | "post" | "delete" | "options" | "head" | "patch" => operation(v),
            "parameters" => parameters(v),
            _ => v.clone(),
        };
        out.insert(k.clone(), converted);
    }
    Value::Object(out)
}

fn parameters(v: &Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.iter().map(parameter).collect()),
        other => other.clone(),
    }
}

/// A v3 path/query parameter: its `schema`'s fields move up into the parameter.
fn parameter(p: &Value) -> Value {
    let Value::Object(p) = p else {
        return p.clone();
    };
    let mut out = Map::new();
    for (k, v) in p {
        match (k.as_str(), v) {
            ("schema", Value::Object(s)) => {
                for (sk, sv) in s {
                    out.insert(sk.clone(), schema(sv));
                }
            }
            ("$ref", Value::String(r)) => {
                out.insert(
                    k.clone(),
                    r.replace("#/components/parameters/", "#/parameters/")
                        .into(),
                );
            }
            // v3-only parameter fields.
            ("style" | "explode" | "allowReserved" | "examples" | "content", _) => {}
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

fn operation(op: &Value) -> Value {
    let Value::Object(op) = op else {
        return op.clone();
    };
    let mut out = Map::new();
    let mut params = Vec::new();
    let mut consumes = Vec::new();
    let mut produces = Vec::new();
    if let Some(Value::Object(body)) = op.get("requestBody") {
        push_media(&mut consumes, body.get("content"));
        let first = body
            .get("content")
            .and_then(Value::as_object)
            .and_then(|c| c.values().next())
            .and_then(|m| m.get("schema"));
        let mut b = json!({ "in": "body", "name": "body" });
        if let Some(d) = body.get("description") {
            b["description"] = d.clone();
        }
        if body.get("required") == Some(&Value::Bool(true)) {
            b["required"] = true.into();
        }
        b["schema"] = first.map(schema).unwrap_or_else(|| json!({}));
        params.push(b);
    }
    if let Some(Value::Array(ps)) = op.get("parameters") {
        params.extend(ps.iter().map(parameter));
    }
    let mut responses = Map::new();
    if let Some(Value::Object(rs)) = op.get("responses") {
        for (code, r) in rs {
            let mut resp = Map::new();
            if let Some(d) = r.get("description") {
                resp.insert("description".into(), d.clone());
            }
            let content = r.get("content");
            push_media(&mut produces, content);
            if let Some(s) = content
                .and_then(Value::as_object)
                .and_then(|c| c.values().next())
                .and_then(|m| m.get("schema"))
            {
                resp.insert("schema".into(), schema(s));
            }
            responses.insert(code.clone(), Value::Object(resp));
        }
    }
    if consumes.is_empty() {
        // Upstream names `*/*` on every operation without a body.
        consumes.push("*/*".into());
    }
    for (k, v) in op {
        match k.as_str() {
            "requestBody" | "parameters" | "responses" => {}
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out.insert("consumes".into(), json!(order_media(consumes)));
    if !produces.is_empty() {
        out.insert("produces".into(), json!(order_media(produces)));
    }
    if !params.is_empty() {
        out.insert("parameters".into(), Value::Array(params));
    }
    out.insert("responses".into(), Value::Object(responses));
    out.insert("schemes".into(), json!(["https"]));
    Value::Object(out)
}

#[cfg(test)]
mod tests;
