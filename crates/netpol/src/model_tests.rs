//! The examples of upstream's NetworkPolicy page
//! (kubernetes.io/docs/concepts/services-networking/network-policies/) and
//! the semantics around them, as tables of flows and expected verdicts.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use serde_json::{Value, json};

use super::*;
use crate::convert;

fn ns(name: &str, labels: &[(&str, &str)]) -> Namespace {
    let mut l: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // Set by the API server on every namespace.
    l.insert("kubernetes.io/metadata.name".into(), name.into());
    Namespace {
        name: name.into(),
        labels: l,
    }
}

fn pod(ns: &str, name: &str, ip: &str, labels: &[(&str, &str)]) -> Pod {
    Pod {
        namespace: ns.into(),
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ip: Some(ip.parse().expect("ip")),
        node: "n1".into(),
        ..Pod::default()
    }
}

fn policy(ns: &str, name: &str, spec: Value) -> Policy {
    let np: NetworkPolicy = serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns}, "spec": spec
    }))
    .expect("policy");
    convert::policy(&np)
}

/// The cluster most examples run in.
struct Cluster {
    namespaces: Vec<Namespace>,
    pods: Vec<Pod>,
}

fn cluster() -> Cluster {
    Cluster {
        namespaces: vec![
            ns("default", &[]),
            ns("myproject", &[("project", "myproject")]),
            ns("alice", &[("user", "alice")]),
            ns("other", &[]),
            ns("front", &[("namespace", "frontend")]),
            ns("back", &[("namespace", "backend")]),
        ],
        pods: vec![
            pod("default", "db", "10.42.0.10", &[("role", "db")]),
            pod("default", "frontend", "10.42.0.2", &[("role", "frontend")]),
            pod("default", "plain", "10.42.0.3", &[]),
            pod("default", "client", "10.42.0.4", &[("role", "client")]),
            pod("default", "myapp", "10.42.0.5", &[("app", "myapp")]),
            pod("myproject", "mp", "10.42.1.2", &[]),
            pod("alice", "a-client", "10.42.3.2", &[("role", "client")]),
            pod("alice", "a-plain", "10.42.3.3", &[]),
            pod("other", "o-frontend", "10.42.2.2", &[("role", "frontend")]),
            pod("other", "o-client", "10.42.2.3", &[("role", "client")]),
            pod("front", "f", "10.42.4.2", &[]),
            pod("back", "b", "10.42.5.2", &[]),
        ],
    }
}

impl Cluster {
    fn ip(&self, who: &str) -> Ipv4Addr {
        self.pods
            .iter()
            .find(|p| p.name == who)
            .and_then(|p| p.ip)
            .or_else(|| who.parse().ok())
            .unwrap_or_else(|| panic!("no pod or address {who}"))
    }
}

/// (from, to, protocol, port, allowed): `from`/`to` name a pod or an address.
type Flows<'a> = &'a [(&'a str, &'a str, Protocol, u16, bool)];

const TCP: Protocol = Protocol::Tcp;
const UDP: Protocol = Protocol::Udp;

fn check(c: &Cluster, policies: &[Policy], flows: Flows) {
    let model = build(&c.pods, &c.namespaces, policies, None);
    for (from, to, protocol, port, want) in flows {
        let flow = Flow {
            src: c.ip(from),
            dst: c.ip(to),
            protocol: *protocol,
            port: *port,
        };
        assert_eq!(
            allows(&model, &flow),
            *want,
            "{from} -> {to} {protocol:?}/{port} under {:?}",
            policies.iter().map(|p| &p.name).collect::<Vec<_>>()
        );
    }
}

/// The page's first example, `test-network-policy`.
#[test]
fn docs_test_network_policy() {
    let c = cluster();
    let p = policy(
        "default",
        "test-network-policy",
        json!({
            "podSelector": {"matchLabels": {"role": "db"}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{
                "from": [
                    {"ipBlock": {"cidr": "172.17.0.0/16", "except": ["172.17.1.0/24"]}},
                    {"namespaceSelector": {"matchLabels": {"project": "myproject"}}},
                    {"podSelector": {"matchLabels": {"role": "frontend"}}}
                ],
                "ports": [{"protocol": "TCP", "port": 6379}]
            }],
            "egress": [{
                "to": [{"ipBlock": {"cidr": "10.0.0.0/24"}}],
                "ports": [{"protocol": "TCP", "port": 5978}]
            }]
        }),
    );
    check(
        &c,
        &[p],
        &[
            // Ingress to role=db on TCP 6379 from role=frontend in default …
            ("frontend", "db", TCP, 6379, true),
            ("frontend", "db", TCP, 6380, false),
            ("frontend", "db", UDP, 6379, false),
            // … from any pod in a namespace labelled project=myproject …
            ("mp", "db", TCP, 6379, true),
            // … not from others in default nor role=frontend elsewhere …
            ("plain", "db", TCP, 6379, false),
            ("o-frontend", "db", TCP, 6379, false),
            // … and from 172.17.0.0–172.17.0.255 and 172.17.2.0–172.17.255.255.
            ("172.17.0.5", "db", TCP, 6379, true),
            ("172.17.1.5", "db", TCP, 6379, false),
            ("172.17.2.5", "db", TCP, 6379, true),
            ("172.18.0.5", "db", TCP, 6379, false),
            // Egress from role=db only to 10.0.0.0/24 on TCP 5978.
            ("db", "10.0.0.5", TCP, 5978, true),
            ("db", "10.0.0.5", TCP, 80, false),
            ("db", "10.0.1.5", TCP, 5978, false),
            ("db", "frontend", TCP, 80, false),
            // Pods the policy does not select are unrestricted.
            ("frontend", "plain", TCP, 80, true),
            ("plain", "10.0.1.5", TCP, 443, true),
        ],
    );
}

/// "Behavior of to and from selectors": one peer with both selectors
/// versus two peers.
#[test]
fn docs_namespace_and_pod_selector_in_one_peer_or_two() {
    let c = cluster();
    let and = policy(
        "default",
        "and",
        json!({"podSelector": {"matchLabels": {"role": "db"}}, "ingress": [{"from": [
            {"namespaceSelector": {"matchLabels": {"user": "alice"}},
             "podSelector": {"matchLabels": {"role": "client"}}}
        ]}]}),
    );
    let or = policy(
        "default",
        "or",
        json!({"podSelector": {"matchLabels": {"role": "db"}}, "ingress": [{"from": [
            {"namespaceSelector": {"matchLabels": {"user": "alice"}}},
            {"podSelector": {"matchLabels": {"role": "client"}}}
        ]}]}),
    );
    check(
        &c,
        &[and],
        &[
            ("a-client", "db", TCP, 80, true),
            ("a-plain", "db", TCP, 80, false),
            ("client", "db", TCP, 80, false),
            ("o-client", "db", TCP, 80, false),
        ],
    );
    check(
        &c,
        &[or],
        &[
            ("a-client", "db", TCP, 80, true),
            ("a-plain", "db", TCP, 80, true),
            ("client", "db", TCP, 80, true),
            ("o-client", "db", TCP, 80, false),
            ("plain", "db", TCP, 80, false),
        ],
    );
}

/// "Default policies": deny and allow all, ingress and egress, and their
/// combinations (policies are additive).
#[test]
fn docs_default_policies() {
    let c = cluster();
    let deny_ingress = || {
        policy(
            "default",
            "default-deny-ingress",
            json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
        )
    };
    let allow_ingress = policy(
        "default",
        "allow-all-ingress",
        json!({"podSelector": {}, "ingress": [{}], "policyTypes": ["Ingress"]}),
    );
    let deny_egress = || {
        policy(
            "default",
            "default-deny-egress",
            json!({"podSelector": {}, "policyTypes": ["Egress"]}),
        )
    };
    let allow_egress = policy(
        "default",
        "allow-all-egress",
        json!({"podSelector": {}, "egress": [{}], "policyTypes": ["Egress"]}),
    );
    let deny_all = policy(
        "default",
        "default-deny-all",
        json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
    );
    // Ingress to every pod of default is denied; egress is not; other
    // namespaces are not affected.
    check(
        &c,
        &[deny_ingress()],
        &[
            ("mp", "db", TCP, 80, false),
            ("plain", "db", TCP, 80, false),
            ("db", "mp", TCP, 80, true),
            ("db", "10.9.9.9", UDP, 53, true),
            ("mp", "a-plain", TCP, 80, true),
        ],
    );
    check(
        &c,
        &[deny_ingress(), allow_ingress],
        &[
            ("mp", "db", TCP, 80, true),
            ("172.16.0.1", "db", UDP, 53, true),
        ],
    );
    check(
        &c,
        &[deny_egress()],
        &[
            ("db", "mp", TCP, 80, false),
            ("db", "10.9.9.9", UDP, 53, false),
            ("mp", "db", TCP, 80, true),
            // Between two pods of default, the sender's egress denies.
            ("plain", "db", TCP, 80, false),
        ],
    );
    check(
        &c,
        &[deny_egress(), allow_egress],
        &[
            ("db", "mp", TCP, 80, true),
            ("db", "10.9.9.9", UDP, 53, true),
        ],
    );
    check(
        &c,
        &[deny_all],
        &[
            ("db", "mp", TCP, 80, false),
            ("mp", "db", TCP, 80, false),
            ("mp", "a-plain", TCP, 80, true),
        ],
    );
}

/// "Targeting a range of ports": `endPort`.
#[test]
fn docs_multi_port_egress() {
    let c = cluster();
    let p = policy(
        "default",
        "multi-port-egress",
        json!({
            "podSelector": {"matchLabels": {"role": "db"}},
            "policyTypes": ["Egress"],
            "egress": [{
                "to": [{"ipBlock": {"cidr": "10.0.0.0/24"}}],
                "ports": [{"protocol": "TCP", "port": 32000, "endPort": 32768}]
            }]
        }),
    );
    check(
        &c,
        &[p],
        &[
            ("db", "10.0.0.1", TCP, 32000, true),
            ("db", "10.0.0.1", TCP, 32500, true),
            ("db", "10.0.0.1", TCP, 32768, true),
            ("db", "10.0.0.1", TCP, 31999, false),
            ("db", "10.0.0.1", TCP, 32769, false),
            ("db", "10.0.0.1", UDP, 32000, false),
            ("db", "10.0.1.1", TCP, 32000, false),
        ],
    );
}

/// "Targeting multiple namespaces by label" (matchExpressions) and
/// "Targeting a Namespace by its name" (kubernetes.io/metadata.name).
#[test]
fn docs_namespaces_by_label_and_by_name() {
    let c = cluster();
    let by_label = policy(
        "default",
        "egress-namespaces",
        json!({
            "podSelector": {"matchLabels": {"app": "myapp"}},
            "policyTypes": ["Egress"],
            "egress": [{"to": [{"namespaceSelector": {"matchExpressions": [
                {"key": "namespace", "operator": "In", "values": ["frontend", "backend"]}
            ]}}]}]
        }),
    );
    check(
        &c,
        &[by_label],
        &[
            ("myapp", "f", TCP, 80, true),
            ("myapp", "b", UDP, 53, true),
            ("myapp", "mp", TCP, 80, false),
            ("myapp", "plain", TCP, 80, false),
            ("myapp", "10.0.0.1", TCP, 80, false),
        ],
    );
    let by_name = policy(
        "default",
        "by-name",
        json!({
            "podSelector": {"matchLabels": {"role": "db"}},
            "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {
                "kubernetes.io/metadata.name": "myproject"
            }}}]}]
        }),
    );
    check(
        &c,
        &[by_name],
        &[
            ("mp", "db", TCP, 80, true),
            ("a-plain", "db", TCP, 80, false),
        ],
    );
}

#[test]
fn named_ports_resolve_on_the_target_for_ingress_and_on_the_peer_for_egress() {
    let mut c = cluster();
    let http = |port| {
        vec![ContainerPort {
            name: "http".into(),
            protocol: Protocol::Tcp,
            port,
        }]
    };
    // Two servers naming different numbers "http"; one without the name.
    let mut s1 = pod("default", "s1", "10.42.0.21", &[("app", "srv")]);
    s1.ports = http(8080);
    let mut s2 = pod("default", "s2", "10.42.0.22", &[("app", "srv")]);
    s2.ports = http(9090);
    let s3 = pod("default", "s3", "10.42.0.23", &[("app", "srv")]);
    c.pods.extend([s1, s2, s3]);
    let ingress = policy(
        "default",
        "named-in",
        json!({"podSelector": {"matchLabels": {"app": "srv"}},
               "ingress": [{"ports": [{"port": "http"}]}]}),
    );
    check(
        &c,
        &[ingress],
        &[
            ("plain", "s1", TCP, 8080, true),
            ("plain", "s1", TCP, 9090, false),
            ("plain", "s2", TCP, 9090, true),
            ("plain", "s2", TCP, 8080, false),
            // s3 has no port of that name: the rule matches nothing there.
            ("plain", "s3", TCP, 8080, false),
        ],
    );
    let egress = policy(
        "default",
        "named-out",
        json!({"podSelector": {"matchLabels": {"role": "client"}},
        "policyTypes": ["Egress"],
        "egress": [
            {"to": [{"podSelector": {"matchLabels": {"app": "srv"}}}],
             "ports": [{"port": "http"}]},
            {"to": [{"ipBlock": {"cidr": "10.42.0.0/16"}}], "ports": [{"port": "http"}]}
        ]}),
    );
    check(
        &c,
        &[egress],
        &[
            ("client", "s1", TCP, 8080, true),
            ("client", "s1", TCP, 9090, false),
            ("client", "s2", TCP, 9090, true),
            ("client", "s3", TCP, 8080, false),
            // An ipBlock peer has no container ports to name.
            ("client", "plain", TCP, 8080, false),
        ],
    );
    // Egress with no `to`: every pod exposing the name, on its own number.
    let any_peer = policy(
        "default",
        "named-any",
        json!({"podSelector": {"matchLabels": {"role": "client"}},
               "policyTypes": ["Egress"],
               "egress": [{"ports": [{"port": "http"}]}]}),
    );
    check(
        &c,
        &[any_peer],
        &[
            ("client", "s1", TCP, 8080, true),
            ("client", "s2", TCP, 9090, true),
            ("client", "s2", TCP, 8080, false),
        ],
    );
}

#[test]
fn host_network_finished_and_address_less_pods_are_not_subject_nor_peers() {
    let mut c = cluster();
    let mut host = pod("default", "host", "192.168.1.10", &[("role", "frontend")]);
    host.host_network = true;
    let mut done = pod("default", "done", "10.42.0.30", &[("role", "frontend")]);
    done.finished = true;
    let mut pending = pod("default", "pending", "10.42.0.31", &[("role", "frontend")]);
    pending.ip = None;
    c.pods.extend([host, done]);
    c.pods.push(pending);
    let deny_all = policy(
        "default",
        "deny",
        json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
    );
    let from_frontend = policy(
        "default",
        "from-frontend",
        json!({"podSelector": {"matchLabels": {"role": "db"}},
               "ingress": [{"from": [{"podSelector": {"matchLabels": {"role": "frontend"}}}]}]}),
    );
    let model = build(&c.pods, &c.namespaces, &[deny_all, from_frontend], None);
    let subjects: Vec<&str> = model.pods.values().map(|p| p.name.as_str()).collect();
    assert!(!subjects.contains(&"host"), "{subjects:?}");
    assert!(!subjects.contains(&"done"), "{subjects:?}");
    let peers: Vec<&SetDef> = model.sets.values().collect();
    assert_eq!(
        peers,
        vec![&SetDef::Addrs(
            [c.ip("frontend")].into_iter().collect::<BTreeSet<_>>()
        )]
    );
}

#[test]
fn only_this_nodes_pods_are_subjects_and_policies_add_up() {
    let mut c = cluster();
    for p in c.pods.iter_mut().filter(|p| p.namespace == "alice") {
        p.node = "n2".into();
    }
    let deny = policy(
        "alice",
        "deny",
        json!({"podSelector": {}, "policyTypes": ["Ingress"]}),
    );
    let from_default = policy(
        "alice",
        "from-default",
        json!({"podSelector": {"matchLabels": {"role": "client"}},
               "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {
                   "kubernetes.io/metadata.name": "default"}}}],
                 "ports": [{"port": 80}]}]}),
    );
    let from_mp = policy(
        "alice",
        "from-myproject",
        json!({"podSelector": {"matchLabels": {"role": "client"}},
               "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {"project": "myproject"}}}],
                 "ports": [{"protocol": "UDP", "port": 53}]}]}),
    );
    let policies = [deny, from_default, from_mp];
    let on_n1 = build(&c.pods, &c.namespaces, &policies, Some("n1"));
    assert!(on_n1.pods.is_empty(), "{:?}", on_n1.pods);
    let on_n2 = build(&c.pods, &c.namespaces, &policies, Some("n2"));
    let mut names: Vec<&str> = on_n2.pods.values().map(|p| p.name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["a-client", "a-plain"]);
    check(
        &c,
        &policies,
        &[
            ("plain", "a-client", TCP, 80, true),
            ("plain", "a-client", UDP, 53, false),
            ("mp", "a-client", UDP, 53, true),
            ("mp", "a-client", TCP, 80, false),
            ("plain", "a-plain", TCP, 80, false),
        ],
    );
}

#[test]
fn unreadable_peers_and_ports_open_nothing() {
    let c = cluster();
    let p = policy(
        "default",
        "broken",
        json!({"podSelector": {"matchLabels": {"role": "db"}},
        "ingress": [
            {"from": [{"podSelector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}}]},
            {"ports": [{"protocol": "ICMP", "port": 1}]},
            {"from": [{"ipBlock": {"cidr": "fd00::/64"}}]}
        ]}),
    );
    check(
        &c,
        &[p],
        &[
            ("plain", "db", TCP, 80, false),
            ("frontend", "db", TCP, 1, false),
            ("172.17.0.1", "db", TCP, 80, false),
        ],
    );
}

#[test]
fn cidr_parsing_masks_host_bits_and_refuses_ipv6() {
    let cases = [
        ("10.0.0.7/24", Some("10.0.0.0/24")),
        ("0.0.0.0/0", Some("0.0.0.0/0")),
        ("10.1.2.3/32", Some("10.1.2.3/32")),
        ("10.0.0.0/33", None),
        ("fd00::/64", None),
        ("10.0.0.0", None),
    ];
    for (input, want) in cases {
        assert_eq!(
            Cidr::parse(input).map(|c| c.to_string()).as_deref(),
            want,
            "{input}"
        );
    }
    assert!(
        Cidr::parse("0.0.0.0/0")
            .expect("cidr")
            .contains("1.2.3.4".parse().expect("ip"))
    );
}
