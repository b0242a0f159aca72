//! How long the real `nft` takes to program Services: the whole table for
//! N Services × M endpoints, then one endpoint change (the incremental
//! transaction), and the repair check (list + compare). Needs root and
//! nf_tables; no API server.
//!
//! `cargo run --release -p berth-proxy --example proxy_bench -- [services] [endpoints] [rounds]`
//! (default 1000 10 5). The scratch table `ip berth-proxy-bench` has no hooks,
//! so no packet on the machine sees it; it is deleted at the end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_proxy::model::{self, Endpoint, NodeConfig, Protocol, ServicePort};
use berth_proxy::nft::Nft;
use berth_proxy::ruleset::{self, Ruleset, Table};
use berth_proxy::syncer::{SyncKind, Syncer};

fn ports(
    services: usize,
    endpoints: usize,
    changed: Option<usize>,
) -> Vec<(ServicePort, Vec<Endpoint>)> {
    (0..services)
        .map(|i| {
            let sp = ServicePort {
                namespace: format!("ns{}", i % 20),
                name: format!("svc-{i}"),
                port_name: "http".into(),
                protocol: Protocol::Tcp,
                // 10.200.0.0/16 and 10.201.0.0/16: nothing real uses them.
                cluster_ip: std::net::Ipv4Addr::new(10, 200, (i / 250) as u8, (i % 250 + 1) as u8),
                port: 80,
                node_port: None,
                external_ips: vec![],
                affinity_timeout: None,
                internal_local: false,
                external_local: false,
            };
            let eps = (0..endpoints)
                .map(|j| {
                    let n = i * endpoints + j;
                    // The changed Service's last endpoint moves to a new address.
                    let n = if changed == Some(i) && j + 1 == endpoints {
                        60_000 + n % 5000
                    } else {
                        n
                    };
                    Endpoint {
                        ip: std::net::Ipv4Addr::new(10, 201, (n / 250) as u8, (n % 250 + 1) as u8),
                        port: 8080,
                        ready: true,
                        serving: true,
                        terminating: false,
                        node_name: Some("bench".into()),
                    }
                })
                .collect();
            (sp, eps)
        })
        .collect()
}

fn without_hooks(mut rs: Ruleset) -> Ruleset {
    for c in rs.chains.values_mut() {
        c.hook = None;
    }
    rs
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let services = args.first().copied().unwrap_or(1000);
    let endpoints = args.get(1).copied().unwrap_or(10);
    let rounds = args.get(2).copied().unwrap_or(5).max(1);
    let nft = Nft::default();
    if let Err(e) = nft.probe() {
        eprintln!("nft unusable ({e}): run as root on a kernel with nf_tables");
        std::process::exit(1);
    }
    let table = Table::ip("berth-proxy-bench");
    let cfg = NodeConfig {
        cluster_cidr: Some(("10.201.0.0".parse().expect("ip"), 16)),
        ..NodeConfig::new("bench")
    };
    let base_ports = ports(services, endpoints, None);

    let t = Instant::now();
    let base = without_hooks(model::build(&cfg, &base_ports));
    let build_time = t.elapsed();
    let script = ruleset::full(&table, &base);
    println!("| figure ({services} Services x {endpoints} endpoints) | value |");
    println!("|---|---|");
    println!(
        "| ruleset: chains, rules, full transaction; model built in | {} chains, {} rules, {} KiB; {} |",
        base.chains.len(),
        base.chains.values().map(|c| c.rules.len()).sum::<usize>(),
        script.len() / 1024,
        ms(build_time)
    );

    let (mut full, mut change, mut change_total, mut check) = (vec![], vec![], vec![], vec![]);
    let mut inc_size = 0;
    for round in 0..rounds {
        let mut s = Syncer::new(Arc::new(nft.clone()), table.clone());
        let t = Instant::now();
        assert_eq!(s.sync(&base).expect("full sync"), SyncKind::Full);
        full.push(t.elapsed());

        // One endpoint of one Service changes: model + diff + nft, and nft alone.
        let which = (round * 7919) % services;
        let t = Instant::now();
        let changed = without_hooks(model::build(&cfg, &ports(services, endpoints, Some(which))));
        let inc = ruleset::incremental(&table, &base, &changed, &Default::default());
        inc_size = inc.script.len();
        let prepared = t.elapsed();
        let t = Instant::now();
        assert_eq!(
            s.sync(&changed).expect("incremental"),
            SyncKind::Incremental
        );
        change.push(t.elapsed());
        change_total.push(prepared + t.elapsed());

        let t = Instant::now();
        let diffs = s.check().expect("check");
        check.push(t.elapsed());
        assert!(diffs.is_empty(), "{diffs:?}");
        // PROXY_BENCH_KEEP=1 leaves the last round's table for inspection.
        if round + 1 < rounds || std::env::var_os("PROXY_BENCH_KEEP").is_none() {
            s.cleanup().expect("cleanup");
        }
    }
    println!(
        "| whole table (nft -f, atomic), {rounds} rounds | median {} (min {}, max {}) |",
        ms(median(full.clone())),
        ms(*full.iter().min().expect("rounds")),
        ms(*full.iter().max().expect("rounds"))
    );
    println!(
        "| one endpoint change: nft transaction (bytes); with model rebuild and diff | median {} ({} B); {} |",
        ms(median(change)),
        inc_size,
        ms(median(change_total))
    );
    println!(
        "| repair check (nft -j list table, parse, compare) | median {} |",
        ms(median(check))
    );
}
