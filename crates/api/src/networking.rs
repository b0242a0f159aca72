//! networking.k8s.io: the v1beta1 Ingress and IngressClass (removed upstream in
//! 1.22, served here for the seed article's manifests) converted to and from the
//! v1 storage form, their defaults, and the DefaultIngressClass admission step.
//!
//! v1beta1 ↔ v1 as upstream's `pkg/apis/networking/v1beta1/conversion.go`:
//! `spec.backend` ↔ `spec.defaultBackend`; a backend's `serviceName` ↔
//! `service.name`, `servicePort` (int or string) ↔ `service.port.number` /
//! `service.port.name`; everything else has one shape in both. IngressClass
//! has the same shape in both versions.

use serde_json::{Map, Value, json};

pub const GROUP: &str = "networking.k8s.io";
pub const V1: &str = "networking.k8s.io/v1";
pub const V1BETA1: &str = "networking.k8s.io/v1beta1";
/// The annotation naming the default IngressClass; its value is the string "true".
pub const DEFAULT_CLASS_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
/// The pre-IngressClass annotation; an Ingress that has it is not defaulted.
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

fn api_version(obj: &Value) -> &str {
    obj.get("apiVersion").and_then(Value::as_str).unwrap_or("")
}

fn relabel(mut obj: Value, to: &str) -> Value {
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), json!(to));
    }
    obj
}

/// A v1beta1 backend as v1 (only v1beta1's own fields are read).
fn backend_to_v1(b: &Value) -> Value {
    let mut out = Map::new();
    if let Some(name) = b.get("serviceName") {
        let mut port = Map::new();
        match b.get("servicePort") {
            Some(Value::String(s)) => {
                port.insert("name".into(), json!(s));
            }
            Some(n @ Value::Number(_)) => {
                port.insert("number".into(), n.clone());
            }
            _ => {}
        }
        let mut svc = Map::new();
        svc.insert("name".into(), name.clone());
        if !port.is_empty() {
            svc.insert("port".into(), Value::Object(port));
        }
        out.insert("service".into(), Value::Object(svc));
    } else if let Some(port) = b.get("servicePort") {
        // A port without a name: kept so validation reports the missing name.
        let key = if port.is_string() { "name" } else { "number" };
        out.insert(
            "service".into(),
            json!({ "name": "", "port": { key: port } }),
        );
    }
    if let Some(r) = b.get("resource") {
        out.insert("resource".into(), r.clone());
    }
    Value::Object(out)
}

/// A v1 backend as v1beta1.
fn backend_to_v1beta1(b: &Value) -> Value {
    let mut out = Map::new();
    if let Some(svc) = b.get("service") {
        if let Some(name) = svc.get("name") {
            out.insert("serviceName".into(), name.clone());
        }
        let port = svc.get("port");
        match (
            port.and_then(|p| p.get("name")).and_then(Value::as_str),
            port.and_then(|p| p.get("number")),
        ) {
            (Some(name), _) if !name.is_empty() => {
                out.insert("servicePort".into(), json!(name));
            }
            (_, Some(n)) => {
                out.insert("servicePort".into(), n.clone());
            }
            _ => {}
        }
    }
    if let Some(r) = b.get("resource") {
        out.insert("resource".into(), r.clone());
    }
    Value::Object(out)
}

/// Rewrites every backend of an Ingress spec with `f`, and renames the
/// default-backend field from `from` to `to`.
fn map_spec(spec: &mut Value, from: &str, to: &str, f: fn(&Value) -> Value) {
    let Some(m) = spec.as_object_mut() else {
        return;
    };
    // The other version's field name is not this version's: never carried over.
    m.remove(to);
    if let Some(b) = m.remove(from) {
        m.insert(to.into(), f(&b));
    }
    for rule in m
        .get_mut("rules")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        for path in rule
            .pointer_mut("/http/paths")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if let Some(b) = path.get_mut("backend") {
                *b = f(b);
            }
        }
    }
}

/// Any served Ingress version → v1.
pub fn ingress_to_v1(mut obj: Value) -> Value {
    if api_version(&obj) != V1BETA1 {
        return obj;
    }
    if let Some(spec) = obj.get_mut("spec") {
        map_spec(spec, "backend", "defaultBackend", backend_to_v1);
    }
    relabel(obj, V1)
}

/// Any served Ingress version → v1beta1.
pub fn ingress_to_v1beta1(mut obj: Value) -> Value {
    if api_version(&obj) == V1BETA1 {
        return obj;
    }
    if let Some(spec) = obj.get_mut("spec") {
        map_spec(spec, "defaultBackend", "backend", backend_to_v1beta1);
    }
    relabel(obj, V1BETA1)
}

/// IngressClass: one shape in both versions.
pub fn ingress_class_to(obj: Value, version: &str) -> Value {
    relabel(obj, &format!("{GROUP}/{version}"))
}

/// Decodes a v1beta1 Ingress body through the v1 type (unknown fields dropped,
/// wrong types refused) and returns it in v1beta1 form.
pub fn roundtrip_ingress_v1beta1(mut v: Value) -> Result<Value, serde_json::Error> {
    // A v1-only field in a v1beta1 body is unknown there.
    if let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("defaultBackend");
    }
    let v1 = ingress_to_v1(relabel(v, V1BETA1));
    let typed: k8s_openapi::api::networking::v1::Ingress = serde_json::from_value(v1)?;
    Ok(ingress_to_v1beta1(serde_json::to_value(typed)?))
}

/// A v1beta1 IngressClass body through the v1 type.
pub fn roundtrip_ingress_class_v1beta1(v: Value) -> Result<Value, serde_json::Error> {
    let typed: k8s_openapi::api::networking::v1::IngressClass =
        serde_json::from_value(relabel(v, V1))?;
    Ok(relabel(serde_json::to_value(typed)?, V1BETA1))
}

/// v1beta1's defaults (upstream's `SetDefaults_HTTPIngressPath` and
/// `SetDefaults_IngressClass` there): `pathType` ImplementationSpecific, a
/// parameters reference's `scope` Cluster. v1 has no pathType default.
pub fn default_v1beta1(kind: &str, obj: &mut Value) {
    match kind {
        "Ingress" => {
            for rule in obj
                .pointer_mut("/spec/rules")
                .and_then(Value::as_array_mut)
                .into_iter()
                .flatten()
            {
                for path in rule
                    .pointer_mut("/http/paths")
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                {
                    // k8s-openapi's v1 type writes an absent pathType as "".
                    if let Some(p) = path.as_object_mut()
                        && p.get("pathType").is_none_or(|t| t.is_null() || t == "")
                    {
                        p.insert("pathType".into(), json!("ImplementationSpecific"));
                    }
                }
            }
        }
        "IngressClass" => {
            if let Some(p) = obj
                .pointer_mut("/spec/parameters")
                .and_then(Value::as_object_mut)
                && p.get("scope").is_none_or(Value::is_null)
            {
                p.insert("scope".into(), json!("Cluster"));
            }
        }
        _ => {}
    }
}

/// Whether an IngressClass is marked default (the annotation's value is the
/// string "true"; anything else, "True" included, is not).
pub fn is_default_class(class: &Value) -> bool {
    class
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(DEFAULT_CLASS_ANNOTATION))
        .and_then(Value::as_str)
        == Some("true")
}

/// The default IngressClass among `classes`, as upstream 1.33's
/// DefaultIngressClass admission picks it: when several are marked default,
/// the newest by creationTimestamp, ties broken by the smaller name.
pub fn default_class(classes: &[Value]) -> Option<&str> {
    fn name(c: &Value) -> &str {
        c.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
    let created = |c: &Value| {
        c.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.timestamp_nanos_opt().unwrap_or(i64::MIN))
            .unwrap_or(i64::MIN)
    };
    classes
        .iter()
        .filter(|c| is_default_class(c))
        .min_by(|a, b| {
            created(b)
                .cmp(&created(a))
                .then_with(|| name(a).cmp(name(b)))
        })
        .map(name)
}

/// The DefaultIngressClass admission step on create: an Ingress with neither
/// `spec.ingressClassName` nor the `kubernetes.io/ingress.class` annotation gets
/// the default class's name (if there is one). Works on v1 and v1beta1 bodies
/// (the field has one name in both).
pub fn admit_ingress(obj: &mut Value, classes: &[Value]) {
    if obj
        .pointer("/spec/ingressClassName")
        .is_some_and(|v| !v.is_null())
    {
        return;
    }
    if obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(CLASS_ANNOTATION))
        .is_some()
    {
        return;
    }
    let Some(name) = default_class(classes) else {
        return;
    };
    let name = name.to_string();
    if let Some(m) = obj.as_object_mut() {
        let spec = m.entry("spec").or_insert_with(|| json!({}));
        if let Some(s) = spec.as_object_mut() {
            s.insert("ingressClassName".into(), json!(name));
        }
    }
}

/// Reshapes v1's renamed Ingress schemas into v1beta1's: a backend names its
/// Service by `serviceName`/`servicePort`, and the spec's default backend is `backend`.
pub fn v1beta1_schemas(defs: &mut Map<String, Value>) {
    const PKG: &str = "io.k8s.api.networking.v1beta1.";
    let r = |n: &str| json!({ "allOf": [{ "$ref": format!("#/components/schemas/{n}") }] });
    if let Some(props) = defs
        .get_mut(&format!("{PKG}IngressBackend"))
        .and_then(|d| d.get_mut("properties"))
        .and_then(Value::as_object_mut)
    {
        props.remove("service");
        props.insert(
            "serviceName".into(),
            json!({"description": "serviceName specifies the name of the referenced service.", "type": "string"}),
        );
        let mut port = r("io.k8s.apimachinery.pkg.util.intstr.IntOrString");
        port["description"] = json!("servicePort Specifies the port of the referenced service.");
        props.insert("servicePort".into(), port);
    }
    if let Some(props) = defs
        .get_mut(&format!("{PKG}IngressSpec"))
        .and_then(|d| d.get_mut("properties"))
        .and_then(Value::as_object_mut)
        && let Some(mut b) = props.remove("defaultBackend")
    {
        b["description"] = json!(
            "backend is the default backend capable of servicing requests that don't match any rule. At least one of 'backend' or 'rules' must be specified. This field is optional to allow the loadbalancer controller or defaulting logic to specify a global default."
        );
        props.insert("backend".into(), b);
    }
    defs.remove(&format!("{PKG}IngressServiceBackend"));
    defs.remove(&format!("{PKG}ServiceBackendPort"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1beta1_backends_convert_both_ways() {
        let beta = json!({
            "apiVersion": V1BETA1, "kind": "Ingress",
            "metadata": {"name": "x"},
            "spec": {
                "backend": {"serviceName": "def", "servicePort": 80},
                "rules": [{"host": "a.example.com", "http": {"paths": [
                    {"path": "/a", "pathType": "Prefix", "backend": {"serviceName": "a", "servicePort": "http"}},
                    {"path": "/r", "pathType": "Exact", "backend": {"resource": {"apiGroup": "k8s.example.com", "kind": "Bucket", "name": "b"}}},
                ]}}],
            },
        });
        let v1 = ingress_to_v1(beta.clone());
        assert_eq!(v1["apiVersion"], V1);
        assert_eq!(
            v1["spec"]["defaultBackend"],
            json!({"service": {"name": "def", "port": {"number": 80}}})
        );
        assert!(v1["spec"].get("backend").is_none());
        let paths = &v1["spec"]["rules"][0]["http"]["paths"];
        assert_eq!(
            paths[0]["backend"],
            json!({"service": {"name": "a", "port": {"name": "http"}}})
        );
        assert_eq!(paths[1]["backend"]["resource"]["kind"], "Bucket");
        assert_eq!(ingress_to_v1beta1(v1), beta);
    }

    #[test]
    fn roundtrip_drops_v1_only_and_unknown_fields() {
        let body = json!({
            "apiVersion": V1BETA1, "kind": "Ingress",
            "metadata": {"name": "x"},
            "spec": {
                "defaultBackend": {"service": {"name": "v1only", "port": {"number": 1}}},
                "rules": [{"http": {"paths": [{"path": "/", "backend": {"serviceName": "a", "servicePort": 80, "bogus": 1}}]}}],
            },
        });
        let out = roundtrip_ingress_v1beta1(body).unwrap();
        assert!(out["spec"].get("defaultBackend").is_none());
        assert!(out["spec"].get("backend").is_none());
        assert_eq!(
            out["spec"]["rules"][0]["http"]["paths"][0]["backend"],
            json!({"serviceName": "a", "servicePort": 80})
        );
    }

    fn class(name: &str, created: &str, default: Option<&str>) -> Value {
        let mut c = json!({"metadata": {"name": name, "creationTimestamp": created}, "spec": {"controller": "berth.dev/ingress"}});
        if let Some(d) = default {
            c["metadata"]["annotations"] = json!({DEFAULT_CLASS_ANNOTATION: d});
        }
        c
    }

    #[test]
    fn default_class_cases() {
        let t1 = "2026-01-01T00:00:00Z";
        let t2 = "2026-01-01T00:00:05Z";
        let cases: &[(&[Value], Option<&str>)] = &[
            (&[], None),
            (&[class("a", t1, None)], None),
            // Only the string "true" marks a default.
            (&[class("a", t1, Some("True"))], None),
            (
                &[class("a", t1, Some("true")), class("b", t1, None)],
                Some("a"),
            ),
            // Several defaults: the newest wins…
            (
                &[
                    class("old", t1, Some("true")),
                    class("new", t2, Some("true")),
                ],
                Some("new"),
            ),
            // …and at the same time, the smaller name.
            (
                &[class("zz", t1, Some("true")), class("aa", t1, Some("true"))],
                Some("aa"),
            ),
        ];
        for (classes, want) in cases {
            assert_eq!(default_class(classes), *want, "{classes:?}");
        }
    }

    #[test]
    fn admission_sets_the_class_only_when_unset() {
        let classes = [class("nginx", "2026-01-01T00:00:00Z", Some("true"))];
        let cases = [
            (
                json!({"metadata": {"name": "i"}, "spec": {}}),
                Some("nginx"),
            ),
            (json!({"metadata": {"name": "i"}}), Some("nginx")),
            (
                json!({"metadata": {"name": "i"}, "spec": {"ingressClassName": "other"}}),
                Some("other"),
            ),
            (
                json!({"metadata": {"name": "i", "annotations": {CLASS_ANNOTATION: "x"}}, "spec": {}}),
                None,
            ),
        ];
        for (mut obj, want) in cases {
            admit_ingress(&mut obj, &classes);
            assert_eq!(
                obj.pointer("/spec/ingressClassName")
                    .and_then(Value::as_str),
                want,
                "{obj}"
            );
        }
    }

    #[test]
    fn v1beta1_openapi_has_v1beta1_backends() {
        let doc = crate::openapi::document("apis/networking.k8s.io/v1beta1").unwrap();
        let schemas = &doc["components"]["schemas"];
        let backend = &schemas["io.k8s.api.networking.v1beta1.IngressBackend"]["properties"];
        assert!(backend.get("service").is_none());
        assert_eq!(backend["serviceName"]["type"], "string");
        assert!(backend["servicePort"].to_string().contains("IntOrString"));
        let spec = &schemas["io.k8s.api.networking.v1beta1.IngressSpec"]["properties"];
        assert!(spec.get("backend").is_some() && spec.get("defaultBackend").is_none());
        assert!(
            schemas
                .get("io.k8s.apimachinery.pkg.util.intstr.IntOrString")
                .is_some()
        );
        assert!(
            schemas
                .get("io.k8s.api.networking.v1beta1.IngressServiceBackend")
                .is_none()
        );
        assert!(
            schemas
                .get("io.k8s.api.networking.v1beta1.IngressClass")
                .is_some()
        );
        assert!(
            !doc.to_string().contains("io.k8s.api.networking.v1."),
            "v1 names left in the v1beta1 document"
        );
    }

    #[test]
    fn v1beta1_defaults() {
        let mut ing = json!({"spec": {"rules": [{"http": {"paths": [{"path": "/"}, {"path": "/x", "pathType": "Exact"}]}}]}});
        default_v1beta1("Ingress", &mut ing);
        let paths = &ing["spec"]["rules"][0]["http"]["paths"];
        assert_eq!(paths[0]["pathType"], "ImplementationSpecific");
        assert_eq!(paths[1]["pathType"], "Exact");
        let mut cls =
            json!({"spec": {"controller": "a.io/b", "parameters": {"kind": "K", "name": "n"}}});
        default_v1beta1("IngressClass", &mut cls);
        assert_eq!(cls["spec"]["parameters"]["scope"], "Cluster");
    }
}
