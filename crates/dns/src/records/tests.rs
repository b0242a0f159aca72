use super::*;
use serde_json::json;

fn svc(v: serde_json::Value) -> Service {
    serde_json::from_value(v).unwrap()
}

fn slice(v: serde_json::Value) -> EndpointSlice {
    serde_json::from_value(v).unwrap()
}

fn zone() -> Zone {
    let services = [
        svc(json!({"metadata": {"name": "web", "namespace": "default"},
            "spec": {"clusterIP": "10.43.0.20", "clusterIPs": ["10.43.0.20"],
                "ports": [{"name": "http", "port": 80, "protocol": "TCP"}, {"port": 8080}]}})),
        svc(json!({"metadata": {"name": "db", "namespace": "prod"},
            "spec": {"clusterIP": "None", "ports": [{"name": "pg", "port": 5432}]}})),
        svc(json!({"metadata": {"name": "empty", "namespace": "prod"},
            "spec": {"clusterIP": "None"}})),
        svc(json!({"metadata": {"name": "ext", "namespace": "default"},
            "spec": {"type": "ExternalName", "externalName": "Example.COM."}})),
        svc(
            json!({"metadata": {"name": "kube-dns", "namespace": "kube-system"},
            "spec": {"clusterIP": "10.43.0.10", "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]}}),
        ),
        svc(json!({"metadata": {"name": "dual", "namespace": "default"},
            "spec": {"clusterIP": "10.43.0.30", "clusterIPs": ["10.43.0.30", "fd00::30"]}})),
    ];
    let slices = [
        slice(json!({"metadata": {"name": "db-1", "namespace": "prod",
            "labels": {"kubernetes.io/service-name": "db"}},
        "addressType": "IPv4",
        "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}],
        "endpoints": [
            {"addresses": ["10.42.0.5"], "hostname": "db-0", "conditions": {"ready": true}},
            {"addresses": ["10.42.1.6"], "conditions": {}},
            {"addresses": ["10.42.1.7"], "conditions": {"ready": false}},
        ]})),
        slice(json!({"metadata": {"name": "web-1", "namespace": "default",
                "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["10.42.0.9"], "conditions": {"ready": true}}]})),
    ];
    let s: Vec<&Service> = services.iter().collect();
    let e: Vec<&EndpointSlice> = slices.iter().collect();
    Zone::build("cluster.local", &s, &e)
}

fn a(ip: &str) -> Data {
    Data::A(ip.parse().unwrap())
}

fn answer(name: &str, data: Vec<Data>) -> Lookup {
    Lookup::Answer(Answer {
        answers: data.into_iter().map(|d| (name.to_string(), d)).collect(),
        ..Default::default()
    })
}

fn negative(nxdomain: bool) -> Lookup {
    Lookup::Answer(Answer {
        nxdomain,
        soa: true,
        ..Default::default()
    })
}

#[test]
fn lookups() {
    let z = zone();
    let web = "web.default.svc.cluster.local";
    let db = "db.prod.svc.cluster.local";
    let cases: Vec<(&str, RecordType, Lookup)> = vec![
        (web, RecordType::A, answer(web, vec![a("10.43.0.20")])),
        // Any case and a trailing dot.
        (
            "WEB.Default.svc.cluster.local.",
            RecordType::A,
            answer(web, vec![a("10.43.0.20")]),
        ),
        // The type exists nowhere at the name: NODATA with the SOA.
        (web, RecordType::AAAA, negative(false)),
        (
            "dual.default.svc.cluster.local",
            RecordType::AAAA,
            answer(
                "dual.default.svc.cluster.local",
                vec![Data::Aaaa("fd00::30".parse().unwrap())],
            ),
        ),
        // Headless: every ready endpoint (nil ready counts as ready), not the unready one.
        (
            db,
            RecordType::A,
            answer(db, vec![a("10.42.0.5"), a("10.42.1.6")]),
        ),
        // Headless without endpoints: NXDOMAIN, as CoreDNS.
        (
            "empty.prod.svc.cluster.local",
            RecordType::A,
            negative(true),
        ),
        // Endpoint names: the hostname, else the dashed IP.
        (
            "db-0.db.prod.svc.cluster.local",
            RecordType::A,
            answer("db-0.db.prod.svc.cluster.local", vec![a("10.42.0.5")]),
        ),
        (
            "10-42-1-6.db.prod.svc.cluster.local",
            RecordType::A,
            answer("10-42-1-6.db.prod.svc.cluster.local", vec![a("10.42.1.6")]),
        ),
        (
            "10-42-1-7.db.prod.svc.cluster.local",
            RecordType::A,
            negative(true),
        ),
        // Pods, any namespace (pods insecure).
        (
            "10-42-3-4.default.pod.cluster.local",
            RecordType::A,
            answer("10-42-3-4.default.pod.cluster.local", vec![a("10.42.3.4")]),
        ),
        (
            "10-42-3.default.pod.cluster.local",
            RecordType::A,
            negative(true),
        ),
        (
            "nothere.default.svc.cluster.local",
            RecordType::A,
            negative(true),
        ),
        ("web.nons.svc.cluster.local", RecordType::A, negative(true)),
        // Names above records exist: NODATA.
        ("default.svc.cluster.local", RecordType::A, negative(false)),
        ("svc.cluster.local", RecordType::A, negative(false)),
        (
            "ext.default.svc.cluster.local",
            RecordType::A,
            answer(
                "ext.default.svc.cluster.local",
                vec![Data::Cname("example.com".into())],
            ),
        ),
        (
            "20.0.43.10.in-addr.arpa",
            RecordType::PTR,
            answer("20.0.43.10.in-addr.arpa", vec![Data::Ptr(web.into())]),
        ),
        (
            "5.0.42.10.in-addr.arpa.",
            RecordType::PTR,
            answer(
                "5.0.42.10.in-addr.arpa",
                vec![Data::Ptr("db-0.db.prod.svc.cluster.local".into())],
            ),
        ),
        // Reverse names of addresses we do not know, and other domains, are forwarded.
        ("1.1.168.192.in-addr.arpa", RecordType::PTR, Lookup::Forward),
        ("example.com", RecordType::A, Lookup::Forward),
        ("notcluster.local", RecordType::A, Lookup::Forward),
        (
            "cluster.local",
            RecordType::SOA,
            answer("cluster.local", vec![Data::Soa]),
        ),
        (
            "cluster.local",
            RecordType::NS,
            Lookup::Answer(Answer {
                answers: vec![(
                    "cluster.local".into(),
                    Data::Ns("ns.dns.cluster.local".into()),
                )],
                additionals: vec![("ns.dns.cluster.local".into(), a("10.43.0.10"))],
                ..Default::default()
            }),
        ),
        (
            "ns.dns.cluster.local",
            RecordType::A,
            answer("ns.dns.cluster.local", vec![a("10.43.0.10")]),
        ),
        (
            "_dns._udp.kube-dns.kube-system.svc.cluster.local",
            RecordType::SRV,
            Lookup::Answer(Answer {
                answers: vec![(
                    "_dns._udp.kube-dns.kube-system.svc.cluster.local".into(),
                    Data::Srv {
                        port: 53,
                        target: "kube-dns.kube-system.svc.cluster.local".into(),
                    },
                )],
                additionals: vec![(
                    "kube-dns.kube-system.svc.cluster.local".into(),
                    a("10.43.0.10"),
                )],
                ..Default::default()
            }),
        ),
    ];
    for (name, qtype, want) in cases {
        assert_eq!(z.lookup(name, qtype), want, "{name} {qtype}");
    }
}

#[test]
fn srv_records_carry_port_names_and_targets() {
    let z = zone();
    let Lookup::Answer(ans) = z.lookup("_http._tcp.web.default.svc.cluster.local", RecordType::SRV)
    else {
        panic!("not answered")
    };
    assert_eq!(
        ans.answers,
        vec![(
            "_http._tcp.web.default.svc.cluster.local".to_string(),
            Data::Srv {
                port: 80,
                target: "web.default.svc.cluster.local".into()
            }
        )]
    );
    assert_eq!(
        ans.additionals,
        vec![("web.default.svc.cluster.local".to_string(), a("10.43.0.20"))]
    );
    // Headless: one per ready endpoint, the endpoint's port, hostname targets.
    let Lookup::Answer(ans) = z.lookup("_pg._tcp.db.prod.svc.cluster.local", RecordType::SRV)
    else {
        panic!("not answered")
    };
    let targets: Vec<(u16, String)> = ans
        .answers
        .iter()
        .map(|(_, d)| match d {
            Data::Srv { port, target } => (*port, target.clone()),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        targets,
        vec![
            (5432, "db-0.db.prod.svc.cluster.local".into()),
            (5432, "10-42-1-6.db.prod.svc.cluster.local".into())
        ]
    );
    assert_eq!(ans.additionals.len(), 2);
    // Unnamed ports get no _port._proto name; a wrong protocol is unknown.
    assert_eq!(
        z.lookup("_http._udp.web.default.svc.cluster.local", RecordType::SRV),
        negative(true)
    );
    // The Service name's SRV lists every port.
    let Lookup::Answer(ans) = z.lookup("web.default.svc.cluster.local", RecordType::SRV) else {
        panic!("not answered")
    };
    assert_eq!(ans.answers.len(), 2);
}

#[test]
fn reverse_names() {
    let cases = [
        ("4.3.2.1.in-addr.arpa", Some("1.2.3.4")),
        ("3.2.1.in-addr.arpa", None),
        ("x.3.2.1.in-addr.arpa", None),
        (
            "0.3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa",
            Some("fd00::30"),
        ),
        ("0.3.ip6.arpa", None),
        ("example.com", None),
    ];
    for (name, want) in cases {
        assert_eq!(reverse_ip(name), want.map(|w| w.parse().unwrap()), "{name}");
    }
}

#[test]
fn an_empty_zone_still_answers_for_its_domain() {
    let z = Zone::empty("Cluster.Local.");
    assert_eq!(z.domain(), "cluster.local");
    assert_eq!(
        z.lookup("web.default.svc.cluster.local", RecordType::A),
        negative(true)
    );
    assert_eq!(z.lookup("kubernetes.io", RecordType::A), Lookup::Forward);
}
