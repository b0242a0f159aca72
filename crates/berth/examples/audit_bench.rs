//! Audit logging cost: request throughput and latency of `berth server`
//! without auditing, with a policy whose one rule is level None (evaluated,
//! nothing written) and with every request logged at Metadata to a file
//! (`rules: [{level: Metadata}]`), in one run, each server in turn, twice
//! (the rounds show the machine's noise); then what a request pays for its
//! audit ID when auditing is off.
//!
//! cargo build --release -p berth --bin berth --example audit_bench
//! target/release/examples/audit_bench
//! (BERTH_BENCH_OBJECTS=N changes the 2,000 ConfigMap creates and gets per
//! server, BERTH_BENCH_CLIENTS=N the 16 clients.)

mod bench_common;

use std::hint::black_box;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bench_common::{BenchServer, concurrently, cpu_seconds, percentile};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

/// One phase's figures: requests/s, p50, p99.
type Figures = (f64, Duration, Duration);

async fn phase(
    api: &Api<ConfigMap>,
    prefix: &'static str,
    n: usize,
    clients: usize,
    create: bool,
) -> anyhow::Result<Figures> {
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let start = Instant::now();
    {
        let (api, latencies) = (api.clone(), latencies.clone());
        concurrently(n, clients, move |i| {
            let (api, latencies) = (api.clone(), latencies.clone());
            async move {
                let name = format!("{prefix}-{i}");
                let t = Instant::now();
                if create {
                    let cm: ConfigMap = serde_json::from_value(json!({
                        "metadata": {"name": name, "labels": {"bench": "audit"}},
                        "data": {"key": "value", "other": "x".repeat(64)}
                    }))?;
                    api.create(&PostParams::default(), &cm).await?;
                } else {
                    api.get(&name).await?;
                }
                latencies
                    .lock()
                    .map_err(|_| anyhow::anyhow!("lock"))?
                    .push(t.elapsed());
                Ok(())
            }
        })
        .await?;
    }
    let elapsed = start.elapsed();
    let mut l = latencies
        .lock()
        .map_err(|_| anyhow::anyhow!("lock"))?
        .clone();
    l.sort();
    Ok((
        n as f64 / elapsed.as_secs_f64(),
        percentile(&l, 0.5),
        percentile(&l, 0.99),
    ))
}

struct Run {
    label: &'static str,
    creates: Figures,
    gets: Figures,
    server_cpu_s: f64,
    log_events: usize,
    log_bytes: u64,
}

async fn run(
    label: &'static str,
    flags: &[&str],
    log: Option<&Path>,
    n: usize,
    clients: usize,
) -> anyhow::Result<Run> {
    // No scheduler or controllers: the requests measured are the only load.
    let mut all = vec!["--disable-scheduler", "--disable-controller-manager"];
    all.extend_from_slice(flags);
    let server = BenchServer::start("audit-bench", &all).await?;
    let api: Api<ConfigMap> = Api::namespaced(server.client.clone(), "default");
    phase(&api, "warm", 100, clients, true).await?;
    phase(&api, "warm", 100, clients, false).await?;
    let cpu0 = cpu_seconds(server.child.id());
    let creates = phase(&api, "cm", n, clients, true).await?;
    let gets = phase(&api, "cm", n, clients, false).await?;
    let server_cpu_s = cpu_seconds(server.child.id()) - cpu0;
    drop(server);
    let (log_events, log_bytes) = match log {
        Some(p) => {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            let _ = std::fs::remove_file(p);
            (text.lines().count(), text.len() as u64)
        }
        None => (0, 0),
    };
    Ok(Run {
        label,
        creates,
        gets,
        server_cpu_s,
        log_events,
        log_bytes,
    })
}

/// ns per request of the audit path with auditing off (a new audit ID and
/// the `Audit-ID` header), over the same loop without it.
async fn off_path_ns() -> anyhow::Result<f64> {
    let req = http::Request::get("/api/v1/namespaces/default/configmaps/cm-1").body(())?;
    let peer: SocketAddr = "127.0.0.1:40000".parse()?;
    let response = || http::Response::new(Full::new(Bytes::new()).boxed());
    let iterations = 1_000_000u32;
    let t = Instant::now();
    for _ in 0..iterations {
        black_box(response());
    }
    let baseline = t.elapsed();
    let t = Instant::now();
    for _ in 0..iterations {
        let audit = berth_apiserver::audit::Request::new(None, &req, peer);
        black_box(audit.finish(response()).await);
    }
    let with = t.elapsed();
    Ok((with.saturating_sub(baseline)).as_nanos() as f64 / f64::from(iterations))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let n = env("BERTH_BENCH_OBJECTS", 2000);
    let clients = env("BERTH_BENCH_CLIENTS", 16);
    let dir =
        std::env::temp_dir().join(format!("berth-audit-bench-policies-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let metadata = dir.join("metadata.yaml");
    std::fs::write(
        &metadata,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    )?;
    let none = dir.join("none.yaml");
    std::fs::write(
        &none,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n",
    )?;
    let log = dir.join("audit.log");
    let (metadata, none, log_s) = (
        metadata.display().to_string(),
        none.display().to_string(),
        log.display().to_string(),
    );

    let mut runs = Vec::new();
    for _round in 0..2 {
        runs.push(run("no audit", &[], None, n, clients).await?);
        runs.push(
            run(
                "policy: level None",
                &["--audit-policy-file", &none, "--audit-log-path", &log_s],
                Some(&log),
                n,
                clients,
            )
            .await?,
        );
        runs.push(
            run(
                "policy: Metadata, to a file",
                &["--audit-policy-file", &metadata, "--audit-log-path", &log_s],
                Some(&log),
                n,
                clients,
            )
            .await?,
        );
    }
    let off = off_path_ns().await?;
    let _ = std::fs::remove_dir_all(&dir);

    println!(
        "Audit logging: {n} ConfigMap creates then {n} gets per server, {clients} clients (HTTPS, JSON); two rounds"
    );
    println!(
        "{:<30} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9}",
        "server", "creates/s", "p50", "p99", "gets/s", "p50", "p99", "cpu s", "events", "log MB"
    );
    for r in &runs {
        println!(
            "{:<30} {:>10.0} {:>9.2?} {:>9.2?} {:>9.0} {:>9.2?} {:>9.2?} {:>8.2} {:>8} {:>9.2}",
            r.label,
            r.creates.0,
            r.creates.1,
            r.creates.2,
            r.gets.0,
            r.gets.1,
            r.gets.2,
            r.server_cpu_s,
            r.log_events,
            r.log_bytes as f64 / 1e6
        );
    }
    let best = |label: &str, f: fn(&Run) -> f64| {
        runs.iter()
            .filter(|r| r.label == label)
            .map(f)
            .fold(0.0, f64::max)
    };
    for (what, f) in [
        ("creates", (|r: &Run| r.creates.0) as fn(&Run) -> f64),
        ("gets", |r: &Run| r.gets.0),
    ] {
        let base = best("no audit", f);
        println!(
            "{what}: best round at Metadata {:.0}% of no audit; level None {:.0}%",
            best("policy: Metadata, to a file", f) / base * 100.0,
            best("policy: level None", f) / base * 100.0
        );
    }
    println!("auditing off: {off:.0} ns a request for its Audit-ID (new ID and header)");
    Ok(())
}
