//! Scheduler throughput, like upstream's scheduler_perf SchedulingBasic:
//! N nodes created as plain Node objects (capacity, Ready; no agents, so
//! bound pods never start), then M pods (one container, small requests)
//! created by concurrent clients. A watch on bound pods timestamps every
//! binding. Each pod count runs on a fresh `berth server`.
//!
//! cargo build --release -p berth --bins --examples && ./target/release/examples/scheduler_bench
//! (BERTH_BENCH_NODES, default 5000; BERTH_BENCH_PODS, default "10000,50000";
//! BERTH_BENCH_CLIENTS, default 32; extra arguments go to `berth server`)

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, PostParams};
use kube::runtime::watcher;

mod bench_common;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pod_counts() -> Vec<usize> {
    std::env::var("BERTH_BENCH_PODS")
        .unwrap_or_else(|_| "10000,50000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect()
}

/// Upstream's node-default.yaml: 4 CPUs, 32 GiB, 110 pods, Ready.
fn node(name: &str) -> anyhow::Result<Node> {
    let res = serde_json::json!({"cpu": "4", "memory": "32Gi", "pods": "110"});
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}},
        "status": {"capacity": res, "allocatable": res,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status"}],
            "phase": "Running"}
    }))?)
}

/// Upstream's pod-default.yaml: one container, 100m CPU and 500Mi.
fn pod(name: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "100m", "memory": "500Mi"},
                          "limits": {"cpu": "100m", "memory": "500Mi"}}}]}
    }))?)
}

struct Run {
    pods: usize,
    nodes: usize,
    nodes_created: Duration,
    pods_created: Duration,
    all_bound: Duration,
    steady: f64,
}

async fn run(nodes: usize, total: usize, clients: usize) -> anyhow::Result<Run> {
    // bench_common already runs the control plane only (no agent, no ingress).
    let flags = ["--disable-controller-manager"];
    let server = bench_common::BenchServer::start("sched-bench", &flags).await?;
    let client = server.client.clone();

    let node_api: Api<Node> = Api::all(client.clone());
    let started = Instant::now();
    bench_common::concurrently(nodes, clients, move |i| {
        let api = node_api.clone();
        async move {
            api.create(&PostParams::default(), &node(&format!("bench-node-{i}"))?)
                .await?;
            Ok(())
        }
    })
    .await?;
    let nodes_created = started.elapsed();
    // Let the scheduler's informer catch up with the nodes.
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Every pod that becomes bound enters this watch once (a selector transition).
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let bound_watch = watcher(
        pods.clone(),
        berth_runtime::reflect::informer_config().fields("spec.nodeName!="),
    );
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let watch_task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(bound_watch);
        let mut seen = HashSet::with_capacity(total);
        let mut at = Vec::with_capacity(total);
        let mut ready = Some(ready_tx);
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(watcher::Event::InitDone) => {
                    if let Some(tx) = ready.take() {
                        let _ = tx.send(());
                    }
                }
                Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                    if let Some(n) = p.metadata.name
                        && seen.insert(n)
                    {
                        at.push(Instant::now());
                        if at.len() == total {
                            break;
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => eprintln!("watch: {e}"),
            }
        }
        at
    });
    ready_rx.await?;

    let started = Instant::now();
    let creator = pods.clone();
    bench_common::concurrently(total, clients, move |i| {
        let api = creator.clone();
        async move {
            api.create(&PostParams::default(), &pod(&format!("p-{i}"))?)
                .await?;
            Ok(())
        }
    })
    .await?;
    let pods_created = started.elapsed();
    let at = tokio::time::timeout(Duration::from_secs(1800), watch_task)
        .await
        .map_err(|_| anyhow::anyhow!("pods not all bound within 30 minutes"))??;
    let all_bound = at.last().map(|t| *t - started).unwrap_or_default();
    // Steady state: the middle 80% of bindings.
    let (lo, hi) = (total / 10, total * 9 / 10);
    let steady = if hi > lo + 1 {
        (hi - lo) as f64 / (at[hi - 1] - at[lo]).as_secs_f64().max(1e-9)
    } else {
        0.0
    };
    drop(server);
    Ok(Run {
        pods: total,
        nodes,
        nodes_created,
        pods_created,
        all_bound,
        steady,
    })
}

/// The scheduling algorithm alone, in process: per pod, refresh the snapshot,
/// filter and score with the default profile, assume — no API round trips.
fn algorithm_only(nodes: usize, pods: usize) -> anyhow::Result<f64> {
    use berth_scheduler::cache::Cache;
    use berth_scheduler::framework::{PodInfo, SearchState, Snapshot};
    let fw = berth_scheduler::plugins::new_framework(&Default::default())?;
    let mut cache = Cache::default();
    for i in 0..nodes {
        cache.add_or_update_node(Arc::new(node(&format!("bench-node-{i}"))?));
    }
    let mut snap = Snapshot::default();
    let mut search = SearchState {
        parallelism: berth_scheduler::SchedulerConfig::default().effective_parallelism(),
        ..Default::default()
    };
    let templates: Vec<Pod> = (0..pods)
        .map(|i| {
            let mut p = pod(&format!("p-{i}"))?;
            p.metadata.namespace = Some("default".into());
            Ok(p)
        })
        .collect::<anyhow::Result<_>>()?;
    let started = Instant::now();
    for p in templates {
        cache.update_snapshot(&mut snap);
        let pi = Arc::new(PodInfo::new(p));
        let res = fw
            .schedule_pod(&pi, &snap, &mut search)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        cache.assume_pod(pi, &res.suggested_host)?;
    }
    Ok(pods as f64 / started.elapsed().as_secs_f64())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let nodes = env("BERTH_BENCH_NODES", 5000);
    let clients = env("BERTH_BENCH_CLIENTS", 32);
    let algo_pods = env("BERTH_BENCH_ALGO_PODS", 20_000);
    let algo = tokio::task::spawn_blocking(move || algorithm_only(nodes, algo_pods)).await??;
    let mut runs = Vec::new();
    for total in pod_counts() {
        eprintln!("running {total} pods on {nodes} nodes …");
        match run(nodes, total, clients).await {
            Ok(r) => runs.push(r),
            // One failed size still leaves the others' figures.
            Err(e) => eprintln!("{total} pods: {e:#}"),
        }
    }
    println!(
        "| nodes | pods | nodes created | pods created ({clients} clients) | first create → last bound | throughput | steady state (10–90%) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for r in runs {
        println!(
            "| {} | {} | {:.1} s | {:.1} s ({:.0}/s) | {:.1} s | {:.0} pods/s | {:.0} pods/s |",
            r.nodes,
            r.pods,
            r.nodes_created.as_secs_f64(),
            r.pods_created.as_secs_f64(),
            r.pods as f64 / r.pods_created.as_secs_f64(),
            r.all_bound.as_secs_f64(),
            r.pods as f64 / r.all_bound.as_secs_f64(),
            r.steady,
        );
    }
    println!(
        "\nScheduling algorithm alone (in process, {nodes} nodes, {algo_pods} pods, no API): {algo:.0} pods/s"
    );
    Ok(())
}
