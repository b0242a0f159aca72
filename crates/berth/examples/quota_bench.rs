//! Quota admission cost: pod create throughput and latency in a namespace
//! with no ResourceQuota against one with five (compute requests/limits,
//! a pod count, `count/pods`, a NotBestEffort-scoped quota and one with a
//! PriorityClass `scopeSelector` that does not match), on one server, in one
//! run. Every matching quota's `status.used` is charged on each create (a
//! resourceVersion-guarded write), so the figure includes those writes.
//!
//! cargo build --release -p berth --bin berth --example quota_bench
//! target/release/examples/quota_bench
//! (BERTH_BENCH_OBJECTS=N changes the 1,000 pods per namespace,
//! BERTH_BENCH_CLIENTS=N the 16 clients; server flags may follow `--`.)

mod bench_common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bench_common::{BenchServer, concurrently, percentile};
use k8s_openapi::api::core::v1::{Namespace, Pod, ResourceQuota, ServiceAccount};
use kube::api::{Api, PostParams};
use serde_json::json;

fn pod(prefix: &str, i: usize) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": format!("{prefix}-{i}")},
        "spec": {"containers": [{"name": "c", "image": "nginx",
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                          "limits": {"cpu": "20m", "memory": "32Mi"}}}]}
    }))?)
}

/// The five quotas: generous enough that nothing is refused.
fn quotas() -> Vec<serde_json::Value> {
    let q = |name: &str, spec: serde_json::Value| json!({"metadata": {"name": name}, "spec": spec});
    vec![
        q(
            "compute",
            json!({"hard": {"requests.cpu": "1000", "requests.memory": "1Ti",
                            "limits.cpu": "2000", "limits.memory": "2Ti"}}),
        ),
        q("pods", json!({"hard": {"pods": "100000"}})),
        q(
            "objects",
            json!({"hard": {"count/pods": "100000", "configmaps": "100", "secrets": "100"}}),
        ),
        q(
            "not-best-effort",
            json!({"hard": {"pods": "100000", "requests.cpu": "1000"}, "scopes": ["NotBestEffort"]}),
        ),
        q(
            "high-priority",
            json!({"hard": {"pods": "10"}, "scopeSelector": {"matchExpressions": [
                {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}),
        ),
    ]
}

/// Creates `n` pods in `ns` with `clients` concurrent clients: (creates/s,
/// p50, p99).
async fn run(
    client: &kube::Client,
    ns: &str,
    prefix: &'static str,
    n: usize,
    clients: usize,
) -> anyhow::Result<(f64, Duration, Duration)> {
    let api: Api<Pod> = Api::namespaced(client.clone(), ns);
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let start = Instant::now();
    {
        let (api, latencies) = (api.clone(), latencies.clone());
        concurrently(n, clients, move |i| {
            let (api, latencies) = (api.clone(), latencies.clone());
            async move {
                let p = pod(prefix, i)?;
                let t = Instant::now();
                api.create(&PostParams::default(), &p).await?;
                latencies.lock().unwrap().push(t.elapsed());
                Ok(())
            }
        })
        .await?;
    }
    let elapsed = start.elapsed();
    let mut l = latencies.lock().unwrap().clone();
    l.sort();
    Ok((
        n as f64 / elapsed.as_secs_f64(),
        percentile(&l, 0.5),
        percentile(&l, 0.99),
    ))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let env = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    let n = env("BERTH_BENCH_OBJECTS", 1000);
    let clients = env("BERTH_BENCH_CLIENTS", 16);
    // No scheduler, no controllers: pods stay Pending and the quotas' status
    // is set here, so only admission differs between the two namespaces.
    let server = BenchServer::start(
        "quota-bench",
        &["--disable-scheduler", "--disable-controller-manager"],
    )
    .await?;
    let client = server.client.clone();
    let ns = "quota-bench";
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
        )
        .await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "default"}}))?,
        )
        .await?;
    let rq: Api<ResourceQuota> = Api::namespaced(client.clone(), ns);
    for q in quotas() {
        let created = rq
            .create(&PostParams::default(), &serde_json::from_value(q.clone())?)
            .await?;
        // What the quota controller would write: hard from spec, nothing used.
        let mut with_status = created.clone();
        let hard = q["spec"]["hard"].clone();
        let used: serde_json::Map<String, serde_json::Value> = hard
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| (k.clone(), json!("0")))
            .collect();
        with_status.status = Some(serde_json::from_value(json!({"hard": hard, "used": used}))?);
        let name = created.metadata.name.clone().unwrap_or_default();
        rq.replace_status(&name, &PostParams::default(), &with_status)
            .await?;
    }

    // Warm up both paths, then measure.
    run(&client, "default", "warm", 50, clients).await?;
    let plain = run(&client, "default", "p", n, clients).await?;
    run(&client, ns, "warm", 50, clients).await?;
    let quota = run(&client, ns, "p", n, clients).await?;

    let used = rq.get("pods").await?;
    let pods_used = used
        .status
        .and_then(|s| s.used)
        .and_then(|u| u.get("pods").map(|q| q.0.clone()))
        .unwrap_or_default();

    println!("Quota admission: {n} pod creates, {clients} clients (HTTPS, JSON)");
    println!(
        "{:<28} {:>10} {:>10} {:>10}",
        "namespace", "creates/s", "p50", "p99"
    );
    for (label, (rate, p50, p99)) in [("no quotas", plain), ("5 quotas", quota)] {
        println!("{label:<28} {rate:>10.0} {:>10.1?} {:>10.1?}", p50, p99);
    }
    println!(
        "throughput with 5 quotas: {:.0}% of without; quota 'pods' used = {pods_used} (expected {})",
        quota.0 / plain.0 * 100.0,
        n + 50
    );
    Ok(())
}
