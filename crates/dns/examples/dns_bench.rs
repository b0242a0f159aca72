//! DNS queries/s and latency of the cluster DNS and of NodeLocal DNSCache, on
//! loopback. This process serves both (the cluster DNS with a zone of
//! `--services` Services, the cache forwarding its misses to it over TCP); the
//! load comes from a second process (this binary with `load`): `--concurrency`
//! clients, each one UDP socket sending a query and waiting for its answer,
//! for `--seconds` per row.
//!
//!     cargo run --release -p berth-dns --example dns_bench
//!     cargo run --release -p berth-dns --example dns_bench -- --seconds 5 --concurrency 32

use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use berth_dns::{cache, cluster, iface, nodelocal, records};
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use k8s_openapi::api::core::v1::Service;

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("load") {
        return load(&args);
    }
    let seconds = arg(&args, "--seconds", 5);
    let concurrency = arg(&args, "--concurrency", 16);
    let services = arg(&args, "--services", 1000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (dns, cache_addr) = rt.block_on(start(services));
    println!(
        "{services} Services; {concurrency} UDP clients in a second process, {seconds} s per row"
    );
    println!("| target | queries/s | p50 ms | p99 ms | max ms | errors |");
    println!("|---|---|---|---|---|---|");
    let rows = [
        ("cluster DNS (A, Service names)", dns, "svc"),
        ("cluster DNS (NXDOMAIN)", dns, "nx"),
        ("NodeLocal DNSCache (hits)", cache_addr, "svc"),
        (
            "NodeLocal DNSCache (misses: TCP to cluster DNS)",
            cache_addr,
            "pod",
        ),
    ];
    for (label, addr, kind) in rows {
        let out = Command::new(std::env::current_exe().expect("exe"))
            .args([
                "load",
                &addr.to_string(),
                &seconds.to_string(),
                &concurrency.to_string(),
                &services.to_string(),
                kind,
            ])
            .output()
            .expect("load process");
        let line = String::from_utf8_lossy(&out.stdout);
        let f: Vec<f64> = line
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        if f.len() != 5 {
            eprintln!("{label}: {line} {}", String::from_utf8_lossy(&out.stderr));
            continue;
        }
        println!(
            "| {label} | {:.0} | {:.3} | {:.3} | {:.3} | {} |",
            f[0], f[1], f[2], f[3], f[4]
        );
    }
}

async fn start(services: u64) -> (SocketAddr, SocketAddr) {
    let svcs: Vec<Service> = (0..services)
        .map(|i| {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("svc-{i}"), "namespace": "default"},
                "spec": {"clusterIP": format!("10.43.{}.{}", 1 + i / 250, 1 + i % 250),
                         "ports": [{"name": "http", "port": 80}]},
            }))
            .expect("service")
        })
        .collect();
    let refs: Vec<&Service> = svcs.iter().collect();
    let zone = records::Zone::build("cluster.local", &refs, &[]);
    let dns = cluster::ClusterDns::bind(cluster::Config {
        bind: "127.0.0.1:0".parse().expect("addr"),
        metrics: None,
        domain: "cluster.local".into(),
        service_ip: None,
        advertise: [127, 0, 0, 1].into(),
        upstreams: vec![],
    })
    .await
    .expect("bind cluster DNS");
    let dns_addr = dns.local_addr();
    dns.serve_zone(zone);
    let cache = nodelocal::NodeLocalDns::start(
        nodelocal::Config {
            bind: "127.0.0.1:0".parse().expect("addr"),
            interface: None,
            upstreams: vec![dns_addr],
            max_ttl: cache::DEFAULT_MAX_TTL,
            negative_ttl: cache::DEFAULT_NEGATIVE_TTL,
            metrics: None,
        },
        Box::new(iface::IpCommand),
    )
    .await
    .expect("start cache");
    let cache_addr = cache.local_addr();
    // Kept running until the process exits.
    std::mem::forget(cache);
    (dns_addr, cache_addr)
}

/// `load ADDR SECONDS CONCURRENCY SERVICES KIND`: prints
/// `queries/s p50_ms p99_ms max_ms errors`.
fn load(args: &[String]) {
    let addr: SocketAddr = args[2].parse().expect("addr");
    let seconds: u64 = args[3].parse().expect("seconds");
    let concurrency: usize = args[4].parse().expect("concurrency");
    let services: u64 = args[5].parse().expect("services");
    let kind = args[6].clone();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let kind = Arc::new(kind);
    let workers: Vec<_> = (0..concurrency)
        .map(|w| {
            let kind = kind.clone();
            std::thread::spawn(move || {
                let sock = UdpSocket::bind("127.0.0.1:0").expect("socket");
                sock.connect(addr).expect("connect");
                sock.set_read_timeout(Some(Duration::from_secs(1)))
                    .expect("timeout");
                let mut lat = Vec::new();
                let mut errors = 0u64;
                let mut buf = [0u8; 4096];
                let mut i = w as u64;
                // A random-looking walk over the names, different per worker.
                while Instant::now() < deadline {
                    i = i
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let n = (i >> 33) % services;
                    let name = match kind.as_str() {
                        "svc" => format!("svc-{n}.default.svc.cluster.local."),
                        "nx" => format!("nx-{n}.default.svc.cluster.local."),
                        // Unique names: always a miss at the cache.
                        _ => {
                            let k = lat.len() + errors as usize;
                            format!(
                                "10-{}-{}-{}.w{w}.pod.cluster.local.",
                                (k >> 16) & 255,
                                (k >> 8) & 255,
                                k & 255
                            )
                        }
                    };
                    let mut q = Message::query();
                    q.metadata.recursion_desired = true;
                    q.add_query(Query::query(
                        Name::from_ascii(&name).expect("name"),
                        RecordType::A,
                    ));
                    let raw = q.to_vec().expect("encode");
                    let t = Instant::now();
                    if sock.send(&raw).is_err() {
                        errors += 1;
                        continue;
                    }
                    match sock.recv(&mut buf) {
                        Ok(n) if n >= 12 && buf[..2] == raw[..2] => lat.push(t.elapsed()),
                        _ => errors += 1,
                    }
                }
                (lat, errors)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut errors = 0;
    for w in workers {
        let (lat, e) = w.join().expect("worker");
        all.extend(lat);
        errors += e;
    }
    all.sort();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .map(|d| d.as_secs_f64() * 1000.0)
            .unwrap_or(0.0)
    };
    println!(
        "{} {} {} {} {}",
        all.len() as f64 / seconds as f64,
        pct(0.5),
        pct(0.99),
        all.last().map(|d| d.as_secs_f64() * 1000.0).unwrap_or(0.0),
        errors
    );
}
