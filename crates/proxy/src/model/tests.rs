use super::*;

const NODE: &str = "n1";

fn cfg() -> NodeConfig {
    NodeConfig {
        node_name: NODE.into(),
        cluster_cidr: Some(("10.42.0.0".parse().expect("ip"), 16)),
        masquerade_bit: 14,
    }
}

fn sp() -> ServicePort {
    ServicePort {
        namespace: "ns".into(),
        name: "web".into(),
        port_name: "http".into(),
        protocol: Protocol::Tcp,
        cluster_ip: "10.43.0.5".parse().expect("ip"),
        port: 80,
        node_port: None,
        external_ips: vec![],
        affinity_timeout: None,
        internal_local: false,
        external_local: false,
    }
}

/// `ip[:flags]` where flags are r (ready), s (serving), t (terminating),
/// l (on this node); no flags = ready and serving on another node.
fn ep(spec: &str) -> Endpoint {
    let (ip, flags) = spec.split_once(':').unwrap_or((spec, "rs"));
    Endpoint {
        ip: ip.parse().expect("ip"),
        port: 8080,
        ready: flags.contains('r'),
        serving: flags.contains('s'),
        terminating: flags.contains('t'),
        node_name: Some(if flags.contains('l') { NODE } else { "n2" }.into()),
    }
}

fn eps(specs: &[&str]) -> Vec<Endpoint> {
    specs.iter().map(|s| ep(s)).collect()
}

fn map(rs: &Ruleset, name: &str) -> Vec<String> {
    rs.maps[name]
        .elements
        .iter()
        .map(|(k, v)| format!("{k} : {v}"))
        .collect()
}

fn rules(rs: &Ruleset, chain: &str) -> Vec<String> {
    rs.chains
        .get(chain)
        .unwrap_or_else(|| panic!("no chain {chain} in {:?}", rs.chains.keys()))
        .rules
        .clone()
}

/// Endpoint chain names are long: tests name them by their endpoint.
fn epc(sp: &ServicePort, spec: &str) -> String {
    endpoint_chain(sp, &ep(spec))
}

fn svc_chains(rs: &Ruleset) -> Vec<String> {
    service_chains(rs).into_iter().map(String::from).collect()
}

#[test]
fn names_are_stable_distinct_and_valid_for_nft() {
    let a = PortChains::of(&sp());
    assert!(a.cluster.starts_with("service-") && a.cluster.ends_with("-ns/web/tcp/http"));
    assert_eq!(
        a.cluster.len(),
        "service-".len() + 9 + "ns/web/tcp/http".len()
    );
    assert_eq!(a, PortChains::of(&sp()), "stable");
    let e1 = epc(&sp(), "10.42.0.5");
    let e2 = epc(&sp(), "10.42.0.6");
    assert!(e1.ends_with("-ns/web/tcp/http__10.42.0.5/8080"), "{e1}");
    assert_ne!(e1[..17], e2[..17], "the hash tells similar names apart");
    let ok = |n: &str| {
        n.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-/._".contains(c))
            && n.len() < 256
    };
    let long = ServicePort {
        namespace: "n".repeat(63),
        name: "s".repeat(63),
        port_name: "p".repeat(63),
        ..sp()
    };
    for n in [
        a.cluster,
        a.local,
        a.external,
        e1,
        endpoint_chain(&long, &ep("10.42.0.5")),
        affinity_set(&long, &ep("10.42.0.5")),
    ] {
        assert!(ok(&n), "{n}");
        assert!(is_service_chain(&n));
    }
    assert!(!is_service_chain(SERVICES_CHAIN));
}

#[test]
fn categorize_prefers_ready_then_serving_terminating() {
    // (endpoints, cluster IPs, local IPs)
    let cases: &[(&[&str], &[&str], &[&str])] = &[
        (&[], &[], &[]),
        (
            &["10.42.0.1", "10.42.0.2:rsl"],
            &["10.42.0.1", "10.42.0.2"],
            &["10.42.0.2"],
        ),
        // Not ready and not serving: never used.
        (&["10.42.0.1:", "10.42.0.2"], &["10.42.0.2"], &[]),
        // Only terminating ones left: the serving ones are used.
        (
            &["10.42.0.1:stl", "10.42.0.2:t"],
            &["10.42.0.1"],
            &["10.42.0.1"],
        ),
        // A ready endpoint elsewhere does not stop the local fallback.
        (
            &["10.42.0.1", "10.42.0.2:stl"],
            &["10.42.0.1"],
            &["10.42.0.2"],
        ),
    ];
    for (input, cluster, local) in cases {
        let all = eps(input);
        let c = categorize(NODE, &all);
        let ips = |v: &[&Endpoint]| v.iter().map(|e| e.ip.to_string()).collect::<Vec<_>>();
        assert_eq!(ips(&c.cluster), *cluster, "{input:?}");
        assert_eq!(ips(&c.local), *local, "{input:?}");
        assert_eq!(c.any, !cluster.is_empty(), "{input:?}");
    }
}

#[test]
fn base_chains_hooks_and_helpers() {
    let rs = build(&cfg(), &[]);
    let hooks: Vec<(String, String)> = rs
        .chains
        .iter()
        .filter_map(|(n, c)| {
            c.hook
                .as_ref()
                .map(|h| (n.clone(), format!("{} {} {}", h.kind, h.hook, h.priority)))
        })
        .collect();
    let want = [
        ("filter-forward", "filter forward -110"),
        ("filter-input", "filter input -110"),
        ("filter-output", "filter output -110"),
        ("filter-output-post-dnat", "filter output -90"),
        ("nat-output", "nat output -100"),
        ("nat-postrouting", "nat postrouting srcnat"),
        ("nat-prerouting", "nat prerouting dstnat"),
    ];
    assert_eq!(
        hooks,
        want.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        rules(&rs, MASQUERADING_CHAIN),
        [
            "mark and 0x4000 == 0 return",
            "mark set mark xor 0x4000",
            "masquerade fully-random"
        ]
    );
    assert_eq!(rules(&rs, MARK_MASQ_CHAIN), ["mark set mark or 0x4000"]);
    assert_eq!(rules(&rs, REJECT_CHAIN), ["reject"]);
    assert_eq!(
        rules(&rs, "filter-output"),
        ["ct state new jump service-endpoints-check"]
    );
    assert!(svc_chains(&rs).is_empty());
}

#[test]
fn cluster_ip_with_ready_endpoints_dispatches_at_random() {
    let s = sp();
    let rs = build(
        &cfg(),
        &[(s.clone(), eps(&["10.42.0.5", "10.42.0.6:", "10.42.0.7"]))],
    );
    let chains = PortChains::of(&s);
    assert_eq!(
        map(&rs, SERVICE_IPS_MAP),
        [format!("10.43.0.5 . tcp . 80 : goto {}", chains.cluster)]
    );
    assert!(rs.maps[NO_ENDPOINT_SERVICES_MAP].elements.is_empty());
    assert_eq!(
        rules(&rs, &chains.cluster),
        [
            format!(
                "ip daddr 10.43.0.5 tcp dport 80 ip saddr != 10.42.0.0/16 jump {MARK_MASQ_CHAIN}"
            ),
            format!(
                "numgen random mod 2 vmap {{ 0 : goto {}, 1 : goto {} }}",
                epc(&s, "10.42.0.5"),
                epc(&s, "10.42.0.7")
            ),
        ]
    );
    assert_eq!(
        rules(&rs, &epc(&s, "10.42.0.5")),
        [
            format!("ip saddr 10.42.0.5 jump {MARK_MASQ_CHAIN}"),
            "meta l4proto tcp dnat to 10.42.0.5:8080".to_string(),
        ]
    );
    // The not-ready endpoint has no chain.
    let mut want = vec![
        chains.cluster.clone(),
        epc(&s, "10.42.0.5"),
        epc(&s, "10.42.0.7"),
    ];
    want.sort();
    assert_eq!(svc_chains(&rs), want);
    assert_eq!(
        rs.sets[CLUSTER_IPS_SET].elements,
        BTreeSet::from(["10.43.0.5".to_string()])
    );
}

#[test]
fn without_cluster_cidr_node_traffic_is_not_masqueraded_by_the_service_chain() {
    let s = sp();
    let mut c = cfg();
    c.cluster_cidr = None;
    let rs = build(&c, &[(s.clone(), eps(&["10.42.0.5"]))]);
    assert_eq!(
        rules(&rs, &PortChains::of(&s).cluster),
        [format!(
            "numgen random mod 1 vmap {{ 0 : goto {} }}",
            epc(&s, "10.42.0.5")
        )]
    );
}

#[test]
fn no_usable_endpoints_rejects_and_local_policy_without_local_endpoints_drops() {
    struct Case {
        what: &'static str,
        port: ServicePort,
        eps: &'static [&'static str],
        service_ips: usize,
        no_endpoint_services: Vec<&'static str>,
        no_endpoint_nodeports: Vec<&'static str>,
    }
    let np = ServicePort {
        node_port: Some(30080),
        ..sp()
    };
    let cases = [
        Case {
            what: "no endpoints",
            port: sp(),
            eps: &[],
            service_ips: 0,
            no_endpoint_services: vec!["10.43.0.5 . tcp . 80 : goto reject-chain"],
            no_endpoint_nodeports: vec![],
        },
        Case {
            what: "only unready endpoints",
            port: sp(),
            eps: &["10.42.0.5:", "10.42.0.6:s"],
            service_ips: 0,
            no_endpoint_services: vec!["10.43.0.5 . tcp . 80 : goto reject-chain"],
            no_endpoint_nodeports: vec![],
        },
        Case {
            what: "NodePort without endpoints",
            port: np.clone(),
            eps: &[],
            service_ips: 0,
            no_endpoint_services: vec!["10.43.0.5 . tcp . 80 : goto reject-chain"],
            no_endpoint_nodeports: vec!["tcp . 30080 : goto reject-chain"],
        },
        Case {
            what: "internalTrafficPolicy Local, endpoints elsewhere only",
            port: ServicePort {
                internal_local: true,
                ..sp()
            },
            eps: &["10.42.0.5"],
            service_ips: 0,
            no_endpoint_services: vec!["10.43.0.5 . tcp . 80 : drop"],
            no_endpoint_nodeports: vec![],
        },
        Case {
            what: "externalTrafficPolicy Local, endpoints elsewhere only",
            port: ServicePort {
                external_local: true,
                ..np.clone()
            },
            eps: &["10.42.0.5"],
            service_ips: 1,
            no_endpoint_services: vec![],
            no_endpoint_nodeports: vec!["tcp . 30080 : drop"],
        },
        Case {
            what: "externalTrafficPolicy Local with a local endpoint",
            port: ServicePort {
                external_local: true,
                ..np
            },
            eps: &["10.42.0.5:rsl"],
            service_ips: 1,
            no_endpoint_services: vec![],
            no_endpoint_nodeports: vec![],
        },
    ];
    for c in cases {
        let rs = build(&cfg(), &[(c.port.clone(), eps(c.eps))]);
        assert_eq!(
            rs.maps[SERVICE_IPS_MAP].elements.len(),
            c.service_ips,
            "{}",
            c.what
        );
        assert_eq!(
            map(&rs, NO_ENDPOINT_SERVICES_MAP),
            c.no_endpoint_services,
            "{}",
            c.what
        );
        assert_eq!(
            map(&rs, NO_ENDPOINT_NODEPORTS_MAP),
            c.no_endpoint_nodeports,
            "{}",
            c.what
        );
        if c.eps.is_empty() || c.eps.iter().all(|e| !ep(e).ready) {
            assert!(svc_chains(&rs).is_empty(), "{}: no chains", c.what);
        }
    }
}

#[test]
fn node_port_with_cluster_policy_masquerades() {
    let s = ServicePort {
        node_port: Some(30080),
        ..sp()
    };
    let rs = build(&cfg(), &[(s.clone(), eps(&["10.42.0.5"]))]);
    let c = PortChains::of(&s);
    assert_eq!(
        map(&rs, SERVICE_NODEPORTS_MAP),
        [format!("tcp . 30080 : goto {}", c.external)]
    );
    assert_eq!(
        rules(&rs, &c.external),
        [
            format!("jump {MARK_MASQ_CHAIN}"),
            format!("goto {}", c.cluster)
        ]
    );
    assert_eq!(
        rules(&rs, SERVICES_CHAIN)[1],
        "fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports"
    );
}

#[test]
fn external_traffic_policy_local() {
    let s = ServicePort {
        node_port: Some(30080),
        external_local: true,
        ..sp()
    };
    let rs = build(&cfg(), &[(s.clone(), eps(&["10.42.0.5:rsl", "10.42.0.6"]))]);
    let c = PortChains::of(&s);
    assert_eq!(
        rules(&rs, &c.external),
        [
            format!("ip saddr 10.42.0.0/16 goto {}", c.cluster),
            format!("fib saddr type local jump {MARK_MASQ_CHAIN}"),
            format!("fib saddr type local goto {}", c.cluster),
            format!("goto {}", c.local),
        ]
    );
    assert_eq!(
        rules(&rs, &c.local),
        [format!(
            "numgen random mod 1 vmap {{ 0 : goto {} }}",
            epc(&s, "10.42.0.5:rsl")
        )]
    );
    // ClusterIP traffic still goes everywhere.
    assert!(rules(&rs, &c.cluster)[1].starts_with("numgen random mod 2 "));
    // Without a local endpoint the external chain only short-circuits.
    let rs = build(&cfg(), &[(s.clone(), eps(&["10.42.0.6"]))]);
    assert_eq!(rules(&rs, &c.external).len(), 3);
    assert!(!rs.chains.contains_key(&c.local));
}

#[test]
fn internal_traffic_policy_local_uses_only_local_endpoints() {
    let s = ServicePort {
        internal_local: true,
        ..sp()
    };
    let rs = build(&cfg(), &[(s.clone(), eps(&["10.42.0.5:rsl", "10.42.0.6"]))]);
    let c = PortChains::of(&s);
    assert_eq!(
        map(&rs, SERVICE_IPS_MAP),
        [format!("10.43.0.5 . tcp . 80 : goto {}", c.local)]
    );
    assert_eq!(
        rules(&rs, &c.local)[1],
        format!(
            "numgen random mod 1 vmap {{ 0 : goto {} }}",
            epc(&s, "10.42.0.5:rsl")
        )
    );
    assert!(!rs.chains.contains_key(&c.cluster));
    assert!(!rs.chains.contains_key(&epc(&s, "10.42.0.6")));
}

#[test]
fn client_ip_affinity() {
    let s = ServicePort {
        affinity_timeout: Some(60),
        ..sp()
    };
    let rs = build(&cfg(), &[(s.clone(), eps(&["10.42.0.5", "10.42.0.6"]))]);
    let c = PortChains::of(&s);
    let (a5, a6) = (
        affinity_set(&s, &ep("10.42.0.5")),
        affinity_set(&s, &ep("10.42.0.6")),
    );
    assert_eq!(
        rules(&rs, &c.cluster)[1..3],
        [
            format!("ip saddr @{a5} goto {}", epc(&s, "10.42.0.5")),
            format!("ip saddr @{a6} goto {}", epc(&s, "10.42.0.6")),
        ]
    );
    assert_eq!(
        rules(&rs, &epc(&s, "10.42.0.5"))[1],
        format!("update @{a5} {{ ip saddr timeout 60s }}")
    );
    assert!(rs.sets[&a5].dynamic && rs.sets[&a6].dynamic);
    // Without affinity: no sets besides cluster-ips.
    let rs = build(&cfg(), &[(sp(), eps(&["10.42.0.5"]))]);
    assert_eq!(rs.sets.keys().collect::<Vec<_>>(), [CLUSTER_IPS_SET]);
}

#[test]
fn udp_and_external_ips() {
    let s = ServicePort {
        protocol: Protocol::Udp,
        port: 53,
        port_name: "dns".into(),
        external_ips: vec!["192.0.2.10".parse().expect("ip")],
        ..sp()
    };
    let rs = build(&cfg(), &[(s.clone(), eps(&["10.42.0.5"]))]);
    let c = PortChains::of(&s);
    assert_eq!(
        map(&rs, SERVICE_IPS_MAP),
        [
            format!("10.43.0.5 . udp . 53 : goto {}", c.cluster),
            format!("192.0.2.10 . udp . 53 : goto {}", c.external),
        ]
    );
    assert_eq!(
        rules(&rs, &epc(&s, "10.42.0.5"))[1],
        "meta l4proto udp dnat to 10.42.0.5:8080"
    );
}

#[test]
fn one_endpoint_change_touches_one_service() {
    let a = sp();
    let b = ServicePort {
        name: "other".into(),
        cluster_ip: "10.43.0.6".parse().expect("ip"),
        ..sp()
    };
    let before = build(
        &cfg(),
        &[
            (a.clone(), eps(&["10.42.0.5"])),
            (b.clone(), eps(&["10.42.0.9"])),
        ],
    );
    let after = build(
        &cfg(),
        &[
            (a.clone(), eps(&["10.42.0.5", "10.42.0.6"])),
            (b.clone(), eps(&["10.42.0.9"])),
        ],
    );
    let changed: Vec<&String> = after
        .chains
        .iter()
        .filter(|(n, c)| before.chains.get(*n) != Some(c))
        .map(|(n, _)| n)
        .collect();
    let cluster = PortChains::of(&a).cluster;
    let new_ep = epc(&a, "10.42.0.6");
    let mut want = vec![&cluster, &new_ep];
    want.sort();
    assert_eq!(changed, want);
    assert_eq!(before.maps, after.maps);
}
