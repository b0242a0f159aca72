//! Scheduler throughput, like upstream's SchedulingBasic: N simulated nodes,
//! M pods created as fast as 16 clients can, time until every pod is bound.
//! The simulator also runs each bound pod (status updates), so the server does
//! more work than upstream's benchmark, which never starts pods.
//!
//! cargo build --release -p berth --bins --examples && ./target/release/examples/scheduler_bench
//! (BERTH_BENCH_NODES, default 5000; BERTH_BENCH_PODS, default 10000)

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};

mod bench_common;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pod(name: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox",
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
    }))?)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let nodes = env("BERTH_BENCH_NODES", 5000);
    let total = env("BERTH_BENCH_PODS", 10_000);
    let count = nodes.to_string();
    let server =
        bench_common::BenchServer::start("sched-bench", &["--simulate-nodes", &count]).await?;
    let client = server.client.clone();
    let node_api: Api<Node> = Api::all(client.clone());
    let started = Instant::now();
    loop {
        let listed = node_api
            .list_metadata(&ListParams::default())
            .await?
            .items
            .len();
        if listed >= nodes {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "only {listed} nodes registered"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let register = started.elapsed();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let pods = pods.clone();
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    return Ok::<_, anyhow::Error>(());
                }
                pods.create(&PostParams::default(), &pod(&format!("p-{i}"))?)
                    .await?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    let created = started.elapsed();
    // Unbound pods have an empty spec.nodeName.
    let unbound = ListParams::default().fields("spec.nodeName=");
    loop {
        let left = pods.list_metadata(&unbound).await?.items.len();
        if left == 0 {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(1800),
            "{left} pods never bound"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let bound = started.elapsed();
    println!("| figure | value |");
    println!("|---|---|");
    println!(
        "| simulated nodes registered | {nodes} in {:.1} s |",
        register.as_secs_f64()
    );
    println!(
        "| pods created (16 clients) | {total} in {:.1} s |",
        created.as_secs_f64()
    );
    println!(
        "| all pods bound | {:.1} s after the first create |",
        bound.as_secs_f64()
    );
    println!(
        "| scheduling throughput | {:.0} pods/s |",
        total as f64 / bound.as_secs_f64()
    );
    drop(server);
    Ok(())
}
