//! The generated transactions against the real `nft` (needs root and
//! nf_tables; skipped otherwise). Tables here have no hooks, so no packet on
//! the machine ever sees them.

use std::collections::BTreeSet;
use std::sync::Arc;

use berth_proxy::model::{self, Endpoint, NodeConfig, Protocol, ServicePort};
use berth_proxy::nft::{Nft, NftBackend};
use berth_proxy::ruleset::{self, Ruleset, Table};
use berth_proxy::syncer::{SyncKind, Syncer};

fn nft_works() -> bool {
    let ok = Nft::default().probe().is_ok();
    if !ok {
        eprintln!("nft unusable here (not root, or no nf_tables): skipped");
    }
    ok
}

fn port(name: &str, ip: &str, f: impl FnOnce(&mut ServicePort)) -> ServicePort {
    let mut sp = ServicePort {
        namespace: "kernel-test".into(),
        name: name.into(),
        port_name: "http".into(),
        protocol: Protocol::Tcp,
        cluster_ip: ip.parse().expect("ip"),
        port: 80,
        node_port: None,
        external_ips: vec![],
        affinity_timeout: None,
        internal_local: false,
        external_local: false,
    };
    f(&mut sp);
    sp
}

fn ep(ip: &str, local: bool, ready: bool) -> Endpoint {
    Endpoint {
        ip: ip.parse().expect("ip"),
        port: 8080,
        ready,
        serving: true,
        terminating: !ready,
        node_name: Some(if local { "me" } else { "other" }.into()),
    }
}

/// Every feature of the model once, hooks removed.
fn build(extra_endpoint: bool) -> Ruleset {
    let mut cfg = NodeConfig::new("me");
    cfg.cluster_cidr = Some(("10.242.0.0".parse().expect("ip"), 16));
    let mut web_eps = vec![ep("10.242.0.5", true, true), ep("10.242.1.5", false, true)];
    if extra_endpoint {
        web_eps.push(ep("10.242.1.6", false, true));
    }
    let ports = vec![
        (port("web", "10.243.0.5", |_| {}), web_eps),
        (port("empty", "10.243.0.6", |_| {}), vec![]),
        (
            port("np-local", "10.243.0.7", |p| {
                p.node_port = Some(32001);
                p.external_local = true;
                p.affinity_timeout = Some(60);
                p.external_ips = vec!["192.0.2.200".parse().expect("ip")];
            }),
            vec![ep("10.242.0.8", true, true), ep("10.242.1.8", false, true)],
        ),
        (
            port("itp-local", "10.243.0.8", |p| {
                p.internal_local = true;
                p.protocol = Protocol::Udp;
            }),
            vec![ep("10.242.1.9", false, true)],
        ),
        (
            port("terminating", "10.243.0.9", |p| p.protocol = Protocol::Sctp),
            vec![ep("10.242.0.10", true, false)],
        ),
    ];
    let mut rs = model::build(&cfg, &ports);
    for c in rs.chains.values_mut() {
        c.hook = None;
    }
    rs
}

fn fingerprint(nft: &Nft, table: &Table) -> ruleset::Fingerprint {
    let json = nft.list_json(table).expect("list").expect("table exists");
    ruleset::parse_listing(&json).expect("parse")
}

#[test]
fn transactions_apply_and_the_fingerprint_matches_the_kernel() {
    if !nft_works() {
        return;
    }
    let nft = Nft::default();
    let table = Table::ip(format!("berth-proxy-test-{}", std::process::id()));
    let mut s = Syncer::new(Arc::new(nft.clone()), table.clone());
    let one = build(false);
    let two = build(true);
    assert_eq!(s.sync(&one).expect("full"), SyncKind::Full);
    assert_eq!(
        one.fingerprint(&BTreeSet::new())
            .differences(&fingerprint(&nft, &table)),
        Vec::<String>::new()
    );
    assert!(s.check().expect("check").is_empty());

    assert_eq!(s.sync(&two).expect("incremental"), SyncKind::Incremental);
    assert!(s.check().expect("check").is_empty());
    // Back: a chain is flushed, then deleted by the next sync.
    assert_eq!(s.sync(&one).expect("incremental"), SyncKind::Incremental);
    assert!(s.has_pending());
    assert!(
        s.check().expect("check").is_empty(),
        "the flushed chain is expected"
    );
    assert_eq!(s.sync(&one).expect("incremental"), SyncKind::Incremental);
    assert!(!s.has_pending());
    assert!(s.check().expect("check").is_empty());

    // A chain deleted by hand (the rules jumping to it first, as nft demands):
    // found by the check, repaired by a full sync.
    let named = |prefix: &str| {
        one.chains
            .keys()
            .find(|n| n.starts_with(prefix) && n.contains("/web/"))
            .expect("chain")
            .clone()
    };
    let (svc, endpoint) = (named("service-"), named("endpoint-"));
    nft.apply(&format!(
        "flush chain ip {t} {svc}\ndelete chain ip {t} {endpoint}\n",
        t = table.name
    ))
    .expect("hand edit");
    let diffs = s.check().expect("check");
    assert!(
        diffs.contains(&format!("chain {endpoint} missing")),
        "{diffs:?}"
    );
    assert!(
        diffs.contains(&format!("chain {svc} has 0 rules, not 2")),
        "{diffs:?}"
    );
    assert_eq!(s.sync(&one).expect("repair"), SyncKind::Full);
    assert!(s.check().expect("check").is_empty());
    // The whole table deleted by hand.
    nft.delete_table(&table).expect("delete");
    assert_eq!(
        s.check().expect("check"),
        vec![format!("table {} missing", table.name)]
    );
    assert_eq!(s.sync(&one).expect("repair"), SyncKind::Full);
    assert!(s.check().expect("check").is_empty());

    s.cleanup().expect("cleanup");
    assert!(nft.list_json(&table).expect("list").is_none());
    // Cleaning up twice is fine.
    s.cleanup().expect("cleanup again");
}
