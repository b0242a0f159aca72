use std::collections::BTreeSet;
use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use super::*;

static DOC: LazyLock<Value> = LazyLock::new(document);

fn def(name: &str) -> &'static Value {
    DOC["definitions"]
        .get(name)
        .unwrap_or_else(|| panic!("definition {name} missing"))
}

fn walk<'a>(v: &'a Value, f: &mut impl FnMut(&'a Map<String, Value>)) {
    match v {
        Value::Object(o) => {
            f(o);
            for (k, c) in o {
                match (k.as_str(), c) {
                    // Property names are not keywords (JSONSchemaProps has `allOf`).
                    ("properties", Value::Object(props)) => props.values().for_each(|p| walk(p, f)),
                    _ => walk(c, f),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|c| walk(c, f)),
        _ => {}
    }
}

#[test]
fn refs_resolve_within_definitions() {
    let defs = DOC["definitions"].as_object().unwrap();
    assert!(defs.len() > 300, "{}", defs.len());
    let mut refs = BTreeSet::new();
    walk(&DOC, &mut |o| {
        if let Some(Value::String(r)) = o.get("$ref") {
            refs.insert(r.clone());
        }
        for k in [
            "oneOf",
            "anyOf",
            "allOf",
            "nullable",
            "requestBody",
            "content",
        ] {
            assert!(!o.contains_key(k), "v3-only {k} left: {o:?}");
        }
    });
    assert!(refs.len() > 100);
    for r in refs {
        let name = r
            .strip_prefix("#/definitions/")
            .unwrap_or_else(|| panic!("{r}"));
        assert!(defs.contains_key(name), "dangling {r}");
    }
    assert_eq!(DOC["swagger"], "2.0");
    assert_eq!(DOC["info"]["title"], "Kubernetes");
}

/// What kube-openapi's `proto.NewOpenAPIData` (kubectl 1.27/1.28) rejects; one bad
/// definition makes kubectl's whole schema unusable.
#[test]
fn kubectl_can_parse_every_definition() {
    fn check(path: &str, s: &Value) {
        let o = s
            .as_object()
            .unwrap_or_else(|| panic!("{path}: not an object"));
        if o.contains_key("$ref") {
            assert!(!o.contains_key("type"), "{path}: $ref with a type");
            assert!(
                !o.contains_key("properties"),
                "{path}: $ref with properties"
            );
            return;
        }
        let ty = match o.get("type") {
            None => None,
            Some(Value::String(t)) => Some(t.as_str()),
            Some(t) => panic!("{path}: type {t}"),
        };
        match ty {
            Some("array") => {
                let items = o.get("items").unwrap_or_else(|| panic!("{path}: no items"));
                assert!(items.is_object(), "{path}: items must be one schema");
                check(&format!("{path}[]"), items);
            }
            Some("object") | None => {}
            Some("string" | "integer" | "number" | "boolean") => {}
            Some(t) => panic!("{path}: unknown type {t}"),
        }
        if let Some(Value::Object(props)) = o.get("properties") {
            for (k, v) in props {
                check(&format!("{path}.{k}"), v);
            }
        }
        if let Some(a @ Value::Object(_)) = o.get("additionalProperties") {
            check(&format!("{path}{{}}"), a);
        }
    }
    for (name, s) in DOC["definitions"].as_object().unwrap() {
        check(name, s);
    }
}

#[test]
fn deployment_kinds_and_operations() {
    let d = def("io.k8s.api.apps.v1.Deployment");
    assert_eq!(
        d["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "kind": "Deployment", "version": "v1"}])
    );
    assert_eq!(d["type"], "object");
    let replicas = &def("io.k8s.api.apps.v1.DeploymentSpec")["properties"]["replicas"];
    assert_eq!(replicas["type"], "integer");
    assert!(
        replicas["description"]
            .as_str()
            .unwrap()
            .contains("desired pods")
    );
    // `$ref` siblings stay beside the `$ref` in v2.
    let strategy = &def("io.k8s.api.apps.v1.DeploymentSpec")["properties"]["strategy"];
    assert_eq!(
        strategy["$ref"],
        "#/definitions/io.k8s.api.apps.v1.DeploymentStrategy"
    );
    assert_eq!(strategy["x-kubernetes-patch-strategy"], "retainKeys");
    assert!(strategy["description"].is_string());

    let item = &DOC["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"];
    let patch = &item["patch"];
    assert_eq!(patch["operationId"], "patchAppsV1NamespacedDeployment");
    assert_eq!(patch["x-kubernetes-action"], "patch");
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "apps", "kind": "Deployment", "version": "v1"})
    );
    assert_eq!(
        patch["consumes"],
        json!([
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/apply-patch+yaml"
        ])
    );
    assert_eq!(
        patch["produces"],
        json!([
            "application/json",
            "application/yaml",
            "application/vnd.kubernetes.protobuf"
        ])
    );
    assert_eq!(patch["schemes"], json!(["https"]));
    let params = patch["parameters"].as_array().unwrap();
    assert_eq!(
        params[0],
        json!({"in": "body", "name": "body", "required": true,
               "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}})
    );
    let fv = params
        .iter()
        .find(|p| p["name"] == "fieldValidation")
        .unwrap();
    assert_eq!(fv["in"], "query");
    assert_eq!(fv["type"], "string");
    assert!(fv.get("schema").is_none());
    assert_eq!(
        patch["responses"]["200"]["schema"]["$ref"],
        "#/definitions/io.k8s.api.apps.v1.Deployment"
    );
    assert_eq!(
        patch["responses"]["401"],
        json!({"description": "Unauthorized"})
    );
    let name = &item["parameters"][0];
    assert_eq!(
        (&name["name"], &name["in"], &name["required"], &name["type"]),
        (
            &json!("name"),
            &json!("path"),
            &json!(true),
            &json!("string")
        )
    );
    let get = &item["get"];
    assert_eq!(get["consumes"], json!(["*/*"]));
    assert!(get.get("parameters").is_none());
    let list = &DOC["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments"]["get"];
    assert_eq!(
        list["produces"],
        json!([
            "application/json",
            "application/yaml",
            "application/vnd.kubernetes.protobuf",
            "application/json;stream=watch",
            "application/vnd.kubernetes.protobuf;stream=watch"
        ])
    );
}

#[test]
fn pod_spec_containers_keep_merge_key() {
    let c = &def("io.k8s.api.core.v1.PodSpec")["properties"]["containers"];
    assert_eq!(c["type"], "array");
    assert_eq!(c["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(c["x-kubernetes-patch-strategy"], "merge");
    assert_eq!(
        c["items"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.Container"
    );
    let ports = &def("io.k8s.api.core.v1.Container")["properties"]["ports"];
    assert_eq!(ports["x-kubernetes-patch-merge-key"], "containerPort");
    assert_eq!(
        ports["x-kubernetes-list-map-keys"],
        json!(["containerPort", "protocol"])
    );
}

#[test]
fn scalars_as_upstream_v2() {
    let ios = def("io.k8s.apimachinery.pkg.util.intstr.IntOrString");
    assert_eq!(ios["type"], "string");
    assert_eq!(ios["format"], "int-or-string");
    assert!(ios["description"].is_string());
    let q = def("io.k8s.apimachinery.pkg.api.resource.Quantity");
    assert_eq!(q["type"], "string");
    assert!(q.get("format").is_none());
    assert!(q["description"].as_str().unwrap().contains("Quantity"));
}

#[test]
fn shared_definitions_unite_their_kinds() {
    // Root kind in api/v1, nested in apps/v1 (StatefulSet volumeClaimTemplates).
    let pvc = def("io.k8s.api.core.v1.PersistentVolumeClaim");
    assert_eq!(
        pvc["x-kubernetes-group-version-kind"],
        json!([{"group": "", "kind": "PersistentVolumeClaim", "version": "v1"}])
    );
    let opts = def("io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions");
    let kinds = opts["x-kubernetes-group-version-kind"].as_array().unwrap();
    assert!(kinds.contains(&json!({"group": "apps", "kind": "DeleteOptions", "version": "v1"})));
    assert!(kinds.contains(&json!({"group": "", "kind": "DeleteOptions", "version": "v1"})));
}

#[test]
fn hpa_v2beta2_has_its_own_definitions() {
    let beta = def("io.k8s.api.autoscaling.v2beta2.HorizontalPodAutoscaler");
    assert_eq!(
        beta["x-kubernetes-group-version-kind"],
        json!([{"group": "autoscaling", "kind": "HorizontalPodAutoscaler", "version": "v2beta2"}])
    );
    let v2 = def("io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler");
    assert_eq!(
        v2["x-kubernetes-group-version-kind"],
        json!([{"group": "autoscaling", "kind": "HorizontalPodAutoscaler", "version": "v2"}])
    );
    let spec = def("io.k8s.api.autoscaling.v2beta2.HorizontalPodAutoscalerSpec");
    assert_eq!(
        spec["properties"]["behavior"]["$ref"],
        "#/definitions/io.k8s.api.autoscaling.v2beta2.HorizontalPodAutoscalerBehavior"
    );
    assert!(
        DOC["paths"]
            .get("/apis/autoscaling/v2beta2/namespaces/{namespace}/horizontalpodautoscalers")
            .is_some()
    );
}

#[test]
fn accept_negotiation() {
    assert!(wants_protobuf(PROTOBUF_MEDIA_TYPE));
    assert!(wants_protobuf(PROTOBUF_MEDIA_TYPE_ACCEPT));
    assert!(wants_protobuf(&format!(
        "{PROTOBUF_MEDIA_TYPE_ACCEPT}, application/json"
    )));
    assert!(!wants_protobuf(""));
    assert!(!wants_protobuf("application/json"));
    assert!(!wants_protobuf("*/*"));
    assert!(!wants_protobuf(&format!(
        "application/json, {PROTOBUF_MEDIA_TYPE_ACCEPT}"
    )));
    assert!(wants_protobuf(&format!(
        "application/json;q=0.5, {PROTOBUF_MEDIA_TYPE_ACCEPT}"
    )));
}

// ---------------------------------------------------------------------------------
// A decoder for the test only, with gnostic's field numbers written out again from
// OpenAPIv2.proto (not shared with the encoder), turning the protobuf back into JSON.

enum F<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
}

struct Msg<'a>(Vec<(u32, F<'a>)>);

fn varint(b: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let byte = b[*pos];
        *pos += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return v;
        }
        shift += 7;
    }
}

fn parse(b: &[u8]) -> Msg<'_> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < b.len() {
        let key = varint(b, &mut pos);
        let field = (key >> 3) as u32;
        let f = match key & 7 {
            0 => F::Varint(varint(b, &mut pos)),
            1 => {
                let v = u64::from_le_bytes(b[pos..pos + 8].try_into().unwrap());
                pos += 8;
                F::Fixed64(v)
            }
            2 => {
                let len = varint(b, &mut pos) as usize;
                let s = &b[pos..pos + len];
                pos += len;
                F::Bytes(s)
            }
            w => panic!("unexpected wire type {w} for field {field}"),
        };
        assert!(field > 0);
        out.push((field, f));
    }
    Msg(out)
}

impl<'a> Msg<'a> {
    fn bytes(&self, n: u32) -> impl Iterator<Item = &'a [u8]> + '_ {
        self.0.iter().filter_map(move |(f, v)| match v {
            F::Bytes(b) if *f == n => Some(*b),
            _ => None,
        })
    }
    fn msgs(&self, n: u32) -> Vec<Msg<'a>> {
        self.bytes(n).map(parse).collect()
    }
    fn msg(&self, n: u32) -> Option<Msg<'a>> {
        self.bytes(n).last().map(parse)
    }
    fn strs(&self, n: u32) -> Vec<String> {
        self.bytes(n)
            .map(|b| String::from_utf8(b.to_vec()).unwrap())
            .collect()
    }
    fn set_str(&self, n: u32, key: &str, out: &mut Map<String, Value>) {
        if let Some(s) = self.strs(n).pop() {
            out.insert(key.into(), s.into());
        }
    }
    fn set_strs(&self, n: u32, key: &str, out: &mut Map<String, Value>) {
        let v = self.strs(n);
        if !v.is_empty() {
            out.insert(key.into(), json!(v));
        }
    }
    fn set_bool(&self, n: u32, key: &str, out: &mut Map<String, Value>) {
        for (f, v) in &self.0 {
            if let (true, F::Varint(x)) = (*f == n, v) {
                out.insert(key.into(), (*x != 0).into());
            }
        }
    }
    fn set_double(&self, n: u32, key: &str, out: &mut Map<String, Value>) {
        for (f, v) in &self.0 {
            if let (true, F::Fixed64(x)) = (*f == n, v) {
                out.insert(key.into(), json!(f64::from_bits(*x)));
            }
        }
    }
    /// `Any { google.protobuf.Any value = 1; string yaml = 2 }`, our yaml being JSON.
    fn anys(&self, n: u32) -> Vec<Value> {
        self.msgs(n)
            .iter()
            .map(|a| serde_json::from_str(&a.strs(2).pop().unwrap()).unwrap())
            .collect()
    }
    /// `repeated NamedAny { string name = 1; Any value = 2 }`.
    fn set_extensions(&self, n: u32, out: &mut Map<String, Value>) {
        for na in self.msgs(n) {
            let name = na.strs(1).pop().unwrap();
            let value = na.anys(2).pop().unwrap();
            out.insert(name, value);
        }
    }
}

fn schema_json(m: &Msg) -> Value {
    let mut o = Map::new();
    m.set_str(1, "$ref", &mut o);
    m.set_str(2, "format", &mut o);
    m.set_str(3, "title", &mut o);
    m.set_str(4, "description", &mut o);
    m.set_double(7, "maximum", &mut o);
    m.set_double(9, "minimum", &mut o);
    m.set_bool(16, "uniqueItems", &mut o);
    m.set_strs(19, "required", &mut o);
    let e = m.anys(20);
    if !e.is_empty() {
        o.insert("enum".into(), Value::Array(e));
    }
    if let Some(ap) = m.msg(21) {
        // AdditionalPropertiesItem { Schema schema = 1 | bool boolean = 2 }
        if let Some(s) = ap.msg(1) {
            o.insert("additionalProperties".into(), schema_json(&s));
        } else {
            ap.set_bool(2, "additionalProperties", &mut o);
        }
    }
    if let Some(t) = m.msg(22) {
        // TypeItem { repeated string value = 1 }
        let mut v = t.strs(1);
        assert_eq!(v.len(), 1);
        o.insert("type".into(), v.remove(0).into());
    }
    if let Some(items) = m.msg(23) {
        // ItemsItem { repeated Schema schema = 1 }
        let mut v = items.msgs(1);
        assert_eq!(v.len(), 1);
        o.insert("items".into(), schema_json(&v.remove(0)));
    }
    if let Some(p) = m.msg(25) {
        // Properties { repeated NamedSchema additional_properties = 1 }
        o.insert("properties".into(), named_schemas_json(&p));
    }
    m.set_extensions(31, &mut o);
    Value::Object(o)
}

fn named_schemas_json(m: &Msg) -> Value {
    let mut o = Map::new();
    for ns in m.msgs(1) {
        let name = ns.strs(1).pop().unwrap();
        o.insert(name, schema_json(&ns.msg(2).unwrap()));
    }
    Value::Object(o)
}

fn parameter_json(item: &Msg) -> Value {
    // ParametersItem { Parameter parameter = 1 | JsonReference json_reference = 2 }
    let p = item.msg(1).expect("inline parameter");
    let mut o = Map::new();
    if let Some(b) = p.msg(1) {
        // BodyParameter
        b.set_str(1, "description", &mut o);
        b.set_str(2, "name", &mut o);
        b.set_str(3, "in", &mut o);
        b.set_bool(4, "required", &mut o);
        o.insert("schema".into(), schema_json(&b.msg(5).unwrap()));
        return Value::Object(o);
    }
    // NonBodyParameter { header = 1 | form_data = 2 | query = 3 | path = 4 }
    let nb = p.msg(2).unwrap();
    let (s, ty) = if let Some(q) = nb.msg(3) {
        (q, 6)
    } else {
        (nb.msg(4).expect("query or path parameter"), 5)
    };
    s.set_bool(1, "required", &mut o);
    s.set_str(2, "in", &mut o);
    s.set_str(3, "description", &mut o);
    s.set_str(4, "name", &mut o);
    s.set_str(ty, "type", &mut o);
    // unique_items: 20 in QueryParameterSubSchema, 19 in PathParameterSubSchema.
    s.set_bool(ty + 14, "uniqueItems", &mut o);
    Value::Object(o)
}

fn operation_json(m: &Msg) -> Value {
    let mut o = Map::new();
    m.set_strs(1, "tags", &mut o);
    m.set_str(3, "description", &mut o);
    m.set_str(5, "operationId", &mut o);
    m.set_strs(6, "produces", &mut o);
    m.set_strs(7, "consumes", &mut o);
    let params: Vec<Value> = m.msgs(8).iter().map(parameter_json).collect();
    if !params.is_empty() {
        o.insert("parameters".into(), Value::Array(params));
    }
    let mut responses = Map::new();
    for nr in m.msg(9).unwrap().msgs(1) {
        // NamedResponseValue { name = 1; ResponseValue value = 2 }, ResponseValue { Response response = 1 }
        let code = nr.strs(1).pop().unwrap();
        let r = nr.msg(2).unwrap().msg(1).unwrap();
        let mut ro = Map::new();
        r.set_str(1, "description", &mut ro);
        if let Some(si) = r.msg(2) {
            // SchemaItem { Schema schema = 1 }
            ro.insert("schema".into(), schema_json(&si.msg(1).unwrap()));
        }
        responses.insert(code, Value::Object(ro));
    }
    o.insert("responses".into(), Value::Object(responses));
    m.set_strs(10, "schemes", &mut o);
    m.set_extensions(13, &mut o);
    Value::Object(o)
}

fn document_json(b: &[u8]) -> Value {
    let d = parse(b);
    let mut o = Map::new();
    d.set_str(1, "swagger", &mut o);
    let info = d.msg(2).unwrap();
    o.insert(
        "info".into(),
        json!({"title": info.strs(1).pop(), "version": info.strs(2).pop()}),
    );
    let mut paths = Map::new();
    for np in d.msg(8).unwrap().msgs(2) {
        // NamedPathItem { name = 1; PathItem value = 2 }
        let name = np.strs(1).pop().unwrap();
        let pi = np.msg(2).unwrap();
        let mut item = Map::new();
        for (n, method) in [
            (2, "get"),
            (3, "put"),
            (4, "post"),
            (5, "delete"),
            (6, "options"),
            (7, "head"),
            (8, "patch"),
        ] {
            if let Some(op) = pi.msg(n) {
                item.insert(method.into(), operation_json(&op));
            }
        }
        let params: Vec<Value> = pi.msgs(9).iter().map(parameter_json).collect();
        if !params.is_empty() {
            item.insert("parameters".into(), Value::Array(params));
        }
        paths.insert(name, Value::Object(item));
    }
    o.insert("paths".into(), Value::Object(paths));
    o.insert("definitions".into(), named_schemas_json(&d.msg(9).unwrap()));
    // SecurityDefinitions { NamedSecurityDefinitionsItem { name = 1; value = 2 { ApiKeySecurity = 2 } } }
    let mut sd = Map::new();
    for n in d.msg(13).unwrap().msgs(1) {
        let k = n.msg(2).unwrap().msg(2).unwrap();
        let mut ko = Map::new();
        k.set_str(1, "type", &mut ko);
        k.set_str(2, "name", &mut ko);
        k.set_str(3, "in", &mut ko);
        k.set_str(4, "description", &mut ko);
        sd.insert(n.strs(1).pop().unwrap(), Value::Object(ko));
    }
    o.insert("securityDefinitions".into(), Value::Object(sd));
    // SecurityRequirement { NamedStringArray { name = 1; StringArray { value = 1 } = 2 } }
    let sec: Vec<Value> = d
        .msgs(12)
        .iter()
        .map(|r| {
            let mut ro = Map::new();
            for n in r.msgs(1) {
                ro.insert(n.strs(1).pop().unwrap(), json!(n.msg(2).unwrap().strs(1)));
            }
            Value::Object(ro)
        })
        .collect();
    o.insert("security".into(), Value::Array(sec));
    Value::Object(o)
}

#[test]
fn protobuf_decodes_back_to_the_document() {
    let bytes = proto::encode_document(&DOC);
    // Document.swagger (field 1, length-delimited) comes first.
    assert_eq!(&bytes[..5], b"\x0a\x032.0");
    let decoded = document_json(&bytes);
    let (dp, op) = (&decoded["paths"], &DOC["paths"]);
    for (path, item) in op.as_object().unwrap() {
        assert_eq!(&dp[path], item, "{path}");
    }
    for (name, s) in DOC["definitions"].as_object().unwrap() {
        assert_eq!(&decoded["definitions"][name], s, "{name}");
    }
    assert_eq!(decoded, *DOC);
}

#[test]
fn protobuf_vendor_extensions_are_yaml() {
    // kubectl reads `Any.yaml` with a YAML parser: a gvk list must read as a sequence of
    // mappings, a merge key as a plain string.
    let bytes = proto::encode_document(&DOC);
    let d = parse(&bytes);
    let defs = d.msg(9).unwrap().msgs(1);
    let find = |name: &str| {
        defs.iter()
            .find(|ns| ns.strs(1).pop().as_deref() == Some(name))
            .and_then(|ns| ns.msg(2))
            .unwrap()
    };
    let deploy = find("io.k8s.api.apps.v1.Deployment");
    let ext = deploy.msgs(31);
    let gvk = ext
        .iter()
        .find(|na| na.strs(1).pop().as_deref() == Some("x-kubernetes-group-version-kind"))
        .unwrap();
    assert_eq!(
        gvk.msg(2).unwrap().strs(2).pop().unwrap(),
        r#"[{"group":"apps","kind":"Deployment","version":"v1"}]"#
    );
    let pod_spec = find("io.k8s.api.core.v1.PodSpec");
    let props = pod_spec.msg(25).unwrap().msgs(1);
    let containers = props
        .iter()
        .find(|ns| ns.strs(1).pop().as_deref() == Some("containers"))
        .and_then(|ns| ns.msg(2))
        .unwrap();
    let mut ext = Map::new();
    containers.set_extensions(31, &mut ext);
    assert_eq!(ext["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(ext["x-kubernetes-patch-strategy"], "merge");
}

#[test]
fn cached_encodings_agree() {
    let c = cached();
    let json: Value = serde_json::from_slice(&c.json).unwrap();
    assert_eq!(json, *DOC);
    assert_eq!(c.protobuf, proto::encode_document(&DOC));
}

#[test]
fn timing() {
    let start = std::time::Instant::now();
    let doc = document();
    let derived = start.elapsed();
    let t = std::time::Instant::now();
    let json = serde_json::to_vec(&doc).unwrap();
    let serialized = t.elapsed();
    let t = std::time::Instant::now();
    let pb = proto::encode_document(&doc);
    let encoded = t.elapsed();
    println!(
        "openapi v2: derived in {derived:?}, JSON {} KiB in {serialized:?}, protobuf {} KiB in {encoded:?}",
        json.len() / 1024,
        pb.len() / 1024
    );
}
