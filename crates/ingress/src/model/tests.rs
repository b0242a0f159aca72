use std::sync::Arc;

use serde_json::{Value, json};

use super::*;

fn obj<T: serde::de::DeserializeOwned>(v: Value) -> Arc<T> {
    Arc::new(serde_json::from_value(v).unwrap())
}

fn class(name: &str, controller: &str) -> Arc<IngressClass> {
    obj(json!({"metadata": {"name": name}, "spec": {"controller": controller}}))
}

fn ingress(name: &str, created: &str, spec: Value) -> Arc<Ingress> {
    obj(
        json!({"metadata": {"name": name, "namespace": "default", "creationTimestamp": created}, "spec": spec}),
    )
}

fn service(name: &str, ports: Value) -> Arc<Service> {
    obj(json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"ports": ports}}))
}

fn slice(svc: &str, ports: Value, endpoints: Value) -> Arc<EndpointSlice> {
    obj(json!({
        "metadata": {"name": format!("{svc}-x"), "namespace": "default", "labels": {"kubernetes.io/service-name": svc}},
        "addressType": "IPv4", "ports": ports, "endpoints": endpoints,
    }))
}

fn rule(host: &str, path: &str, svc: &str, port: Value) -> Value {
    json!({"host": host, "http": {"paths": [{"path": path, "pathType": "Prefix", "backend": {"service": {"name": svc, "port": port}}}]}})
}

const T1: &str = "2026-01-01T00:00:00Z";
const T2: &str = "2026-01-01T00:00:09Z";

#[test]
fn only_ingresses_of_berth_classes_are_served() {
    let classes = [
        class("berth", CONTROLLER),
        class("nginx", "k8s.io/ingress-nginx"),
    ];
    let ings = [
        ingress(
            "ours",
            T1,
            json!({"ingressClassName": "berth", "rules": [rule("a.com", "/", "web", json!({"number": 80}))]}),
        ),
        ingress(
            "theirs",
            T1,
            json!({"ingressClassName": "nginx", "rules": [rule("b.com", "/", "web", json!({"number": 80}))]}),
        ),
        ingress(
            "classless",
            T1,
            json!({"rules": [rule("c.com", "/", "web", json!({"number": 80}))]}),
        ),
        ingress(
            "missing-class",
            T1,
            json!({"ingressClassName": "gone", "rules": [rule("d.com", "/", "web", json!({"number": 80}))]}),
        ),
    ];
    let snap = build(&Inputs {
        ingresses: &ings,
        classes: &classes,
        ..Default::default()
    });
    assert_eq!(
        snap.served,
        vec![("default".to_string(), "ours".to_string())]
    );
    assert!(matches!(
        snap.router.route("a.com", "/"),
        crate::router::Routed::Rule(_)
    ));
    for host in ["b.com", "c.com", "d.com"] {
        assert_eq!(
            snap.router.route(host, "/"),
            crate::router::Routed::NotFound,
            "{host}"
        );
    }
}

#[test]
fn endpoints_by_port_number_and_name_only_ready() {
    let classes = [class("berth", CONTROLLER)];
    let ings = [ingress(
        "i",
        T1,
        json!({"ingressClassName": "berth", "rules": [
            rule("num.com", "/", "web", json!({"number": 80})),
            rule("name.com", "/", "web", json!({"name": "admin"})),
        ]}),
    )];
    let svcs = [service(
        "web",
        json!([{"name": "http", "port": 80, "targetPort": 8080}, {"name": "admin", "port": 81, "targetPort": 9090}]),
    )];
    let slices = [slice(
        "web",
        json!([{"name": "http", "port": 8080, "protocol": "TCP"}, {"name": "admin", "port": 9090, "protocol": "TCP"}]),
        json!([
            {"addresses": ["10.0.0.1"], "conditions": {"ready": true}},
            {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
            {"addresses": ["10.0.0.3"]},
        ]),
    )];
    let snap = build(&Inputs {
        ingresses: &ings,
        classes: &classes,
        services: &svcs,
        slices: &slices,
        ..Default::default()
    });
    let eps = |host: &str| match snap.router.route(host, "/") {
        crate::router::Routed::Rule(k) => snap.endpoints.get(k).cloned().unwrap_or_default(),
        _ => panic!("no route for {host}"),
    };
    let addrs = |port: u16| -> Vec<SocketAddr> {
        vec![
            format!("10.0.0.1:{port}").parse().unwrap(),
            format!("10.0.0.3:{port}").parse().unwrap(),
        ]
    };
    assert_eq!(eps("num.com"), addrs(8080));
    assert_eq!(eps("name.com"), addrs(9090));
    assert!(snap.problems.is_empty(), "{:?}", snap.problems);
}

#[test]
fn bad_input_is_reported_and_the_rest_keeps_serving() {
    let classes = [class("berth", CONTROLLER)];
    let ings = [
        ingress(
            "good",
            T1,
            json!({"ingressClassName": "berth", "rules": [rule("a.com", "/", "web", json!({"number": 80}))]}),
        ),
        ingress(
            "missing-svc",
            T1,
            json!({"ingressClassName": "berth", "rules": [rule("b.com", "/", "nope", json!({"number": 80}))]}),
        ),
        ingress(
            "bad-port",
            T1,
            json!({"ingressClassName": "berth", "rules": [rule("c.com", "/", "web", json!({"number": 99}))]}),
        ),
        ingress(
            "resource",
            T1,
            json!({"ingressClassName": "berth", "rules": [{"host": "d.com", "http": {"paths": [
            {"path": "/", "pathType": "Prefix", "backend": {"resource": {"apiGroup": "k8s.example.com", "kind": "StorageBucket", "name": "static"}}}]}}]}),
        ),
        ingress(
            "overlap",
            T2,
            json!({"ingressClassName": "berth", "rules": [rule("a.com", "/", "web", json!({"number": 80}))]}),
        ),
        ingress(
            "bad-tls",
            T1,
            json!({"ingressClassName": "berth", "tls": [{"hosts": ["e.com"], "secretName": "broken"}, {"hosts": ["f.com"], "secretName": "absent"}], "rules": [rule("e.com", "/", "web", json!({"number": 80}))]}),
        ),
    ];
    let svcs = [service("web", json!([{"port": 80}]))];
    let secrets: [Arc<Secret>; 1] = [obj(
        json!({"metadata": {"name": "broken", "namespace": "default"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "bm90IGEgY2VydA==", "tls.key": "bm90IGEga2V5"}}),
    )];
    let snap = build(&Inputs {
        ingresses: &ings,
        classes: &classes,
        services: &svcs,
        secrets: &secrets,
        ..Default::default()
    });
    let by = problems_by_ingress(&snap);
    let get = |n: &str| {
        by.get(&("default".to_string(), n.to_string()))
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(get("good"), Vec::<&str>::new());
    assert_eq!(get("missing-svc"), vec!["ServiceNotFound"]);
    assert_eq!(get("bad-port"), vec!["PortNotFound"]);
    assert_eq!(get("resource"), vec!["UnsupportedBackend"]);
    assert_eq!(get("overlap"), vec!["RuleConflict"]);
    assert_eq!(get("bad-tls"), vec!["InvalidCertificate", "SecretNotFound"]);
    let msg = &snap
        .problems
        .iter()
        .find(|p| p.reason == "ServiceNotFound")
        .unwrap()
        .message;
    assert_eq!(msg, "Service \"default/nope\" not found");
    // The good Ingress's route still resolves, the missing Service's is a 503.
    match snap.router.route("a.com", "/") {
        crate::router::Routed::Rule(k) => assert_eq!(k.service, "web"),
        other => panic!("{other:?}"),
    }
    match snap.router.route("b.com", "/") {
        crate::router::Routed::Rule(k) => assert!(!snap.endpoints.contains_key(k)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        snap.router.route("d.com", "/"),
        crate::router::Routed::NotFound
    );
}

#[test]
fn certificates_by_host_exact_before_wildcard() {
    let pair = |name: &str| {
        let g = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
        (g.cert.pem(), g.signing_key.serialize_pem())
    };
    let (wc, wk) = pair("*.foo.com");
    let (ec, ek) = pair("bar.foo.com");
    let b64 = |s: &str| k8s_openapi::ByteString(s.as_bytes().to_vec());
    let secret = |name: &str, c: &str, k: &str| -> Arc<Secret> {
        Arc::new(Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                ..Default::default()
            },
            data: Some(
                [
                    ("tls.crt".to_string(), b64(c)),
                    ("tls.key".to_string(), b64(k)),
                ]
                .into(),
            ),
            ..Default::default()
        })
    };
    let secrets = [secret("wild", &wc, &wk), secret("exact", &ec, &ek)];
    let classes = [class("berth", CONTROLLER)];
    let ings = [ingress(
        "i",
        T1,
        json!({"ingressClassName": "berth",
        "tls": [{"hosts": ["*.foo.com"], "secretName": "wild"}, {"hosts": ["bar.foo.com"], "secretName": "exact"}],
        "rules": [rule("*.foo.com", "/", "web", json!({"number": 80}))]}),
    )];
    let snap = build(&Inputs {
        ingresses: &ings,
        classes: &classes,
        secrets: &secrets,
        ..Default::default()
    });
    let der = |pem: &str| {
        rustls_pemfile::certs(&mut pem.as_bytes())
            .next()
            .unwrap()
            .unwrap()
    };
    assert_eq!(snap.cert_for("bar.foo.com").unwrap().cert[0], der(&ec));
    assert_eq!(snap.cert_for("baz.foo.com").unwrap().cert[0], der(&wc));
    assert!(snap.cert_for("a.b.foo.com").is_none());
    assert!(snap.cert_for("other.com").is_none());
}

#[test]
fn status_lists_every_ready_serving_node() {
    let node = |name: &str, addr: Option<&str>, ready: Option<&str>| -> Arc<Node> {
        let annotations = addr.map(|a| json!({NODE_ADDRESS_ANNOTATION: a}));
        let conditions = ready.map(|r| json!([{"type": "Ready", "status": r}]));
        obj(
            json!({"metadata": {"name": name, "annotations": annotations},
                   "status": {"conditions": conditions}}),
        )
    };
    let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
    let own = ip("10.0.0.9");
    type Case<'a> = (&'a str, Vec<Arc<Node>>, Vec<&'a str>);
    let cases: Vec<Case> = vec![
        ("no nodes: own address", vec![], vec!["10.0.0.9"]),
        (
            "own node not annotated yet: nothing",
            vec![node("me", None, Some("True"))],
            vec![],
        ),
        (
            "two serving nodes, sorted",
            vec![
                node("me", Some("10.0.0.9"), Some("True")),
                node("b", Some("10.0.0.2"), Some("True")),
                node("sim", None, Some("True")),
            ],
            vec!["10.0.0.2", "10.0.0.9"],
        ),
        (
            "not-ready and unknown nodes drop out; no condition yet counts",
            vec![
                node("me", Some("10.0.0.9"), None),
                node("b", Some("10.0.0.2"), Some("Unknown")),
                node("c", Some("10.0.0.3"), Some("False")),
            ],
            vec!["10.0.0.9"],
        ),
        (
            "own node absent (no agent here): own address joins the others",
            vec![node("b", Some("10.0.0.2"), Some("True"))],
            vec!["10.0.0.2", "10.0.0.9"],
        ),
        (
            "a malformed annotation is ignored",
            vec![node("me", Some("not-an-ip"), Some("True"))],
            vec![],
        ),
    ];
    for (what, nodes, want) in cases {
        let want: Vec<IpAddr> = want.into_iter().map(ip).collect();
        assert_eq!(serving_addresses(&nodes, "me", own), want, "{what}");
        let status = load_balancer_status(&want);
        let ing: Arc<Ingress> = obj(json!({"metadata": {"name": "i"}, "status": status["status"]}));
        assert!(status_is(&ing, &want), "{what}");
        assert!(!status_is(&ing, &[ip("10.9.9.9")]), "{what}");
    }
}
