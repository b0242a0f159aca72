//! API server benchmark: starts a real `berth server` process and drives it with
//! kube-rs over HTTPS. Prints pod creates/s, latency at a fixed write rate, the
//! latency of listing 10,000 pods, and the server's RSS idle and holding them.
//!
//! cargo build --release -p berth && cargo run --release -p berth --example api_bench
//! (BERTH_BENCH_PODS=N changes the 10,000; --datastore-endpoint URL may follow `--`.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"app": "bench", "shard": (name.len() % 7).to_string()}},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"],
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
    }))
    .expect("pod")
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .map(String::from)
        })
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Creates pods `prefix-i` for every i in `range` from 16 concurrent tasks.
async fn create_concurrently(
    pods: &Api<Pod>,
    range: std::ops::Range<usize>,
    prefix: &'static str,
) -> anyhow::Result<()> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(range.start));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let pods = pods.clone();
        let next = next.clone();
        let end = range.end;
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= end {
                    return Ok::<_, kube::Error>(());
                }
                pods.create(&PostParams::default(), &pod(&format!("{prefix}-{i}")))
                    .await?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

mod bench_common;

use bench_common::percentile;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let total: usize = std::env::var("BERTH_BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    // The whole `berth server` (scheduler and controllers too), idle.
    let full = bench_common::BenchServer::start("api-bench-full", &[]).await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let full_idle_rss = rss_kib(full.child.id());
    drop(full);
    // The API server alone for the rest: without nodes the scheduler would retry
    // every pod, and that is not what these figures are about.
    let server = bench_common::BenchServer::start(
        "api-bench",
        &["--disable-scheduler", "--disable-controller-manager"],
    )
    .await?;
    let pid = server.child.id();
    let client = server.client.clone();
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.list(&ListParams::default().limit(1)).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle_rss = rss_kib(pid);

    // 1. Throughput: 16 concurrent creators.
    let n_burst = total.min(2000);
    let started = Instant::now();
    create_concurrently(&pods, 0..n_burst, "burst").await?;
    let burst_rate = n_burst as f64 / started.elapsed().as_secs_f64();

    // 2. Latency at a fixed 200 writes/s (open loop: requests start on schedule).
    let paced = total.saturating_sub(n_burst).min(3000);
    let mut interval = tokio::time::interval(Duration::from_millis(5));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..paced {
        interval.tick().await;
        let pods = pods.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let t = Instant::now();
            pods.create(&PostParams::default(), &pod(&format!("paced-{i}")))
                .await
                .expect("create");
            let _ = tx.send(t.elapsed());
        });
    }
    drop(tx);
    let mut lat = Vec::new();
    while let Some(d) = rx.recv().await {
        lat.push(d);
    }
    lat.sort();

    // 3. Fill to `total` pods, then time full lists.
    let have = n_burst + paced;
    create_concurrently(&pods, have..total, "fill").await?;
    let mut list_times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let l = pods.list(&ListParams::default()).await?;
        list_times.push(t.elapsed());
        assert_eq!(l.items.len(), total);
    }
    list_times.sort();
    let t = Instant::now();
    let mut token: Option<String> = None;
    let mut count = 0;
    loop {
        let mut lp = ListParams::default().limit(500);
        if let Some(c) = &token {
            lp = lp.continue_token(c);
        }
        let page = pods.list(&lp).await?;
        count += page.items.len();
        token = page.metadata.continue_.filter(|c| !c.is_empty());
        if token.is_none() {
            break;
        }
    }
    let paged = t.elapsed();
    assert_eq!(count, total);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let full_rss = rss_kib(pid);

    println!("| figure | value |");
    println!("|---|---|");
    println!("| pod creates/s (16 concurrent, {n_burst} pods) | {burst_rate:.0} |");
    println!(
        "| create latency at 200 writes/s ({} pods) p50 / p99 | {:.1} ms / {:.1} ms |",
        lat.len(),
        percentile(&lat, 0.5).as_secs_f64() * 1e3,
        percentile(&lat, 0.99).as_secs_f64() * 1e3
    );
    println!(
        "| list {total} pods, one request (median of 5) | {:.0} ms |",
        percentile(&list_times, 0.5).as_secs_f64() * 1e3
    );
    println!(
        "| list {total} pods in pages of 500 | {:.0} ms |",
        paged.as_secs_f64() * 1e3
    );
    println!(
        "| server RSS idle, API server only | {:.1} MiB |",
        idle_rss as f64 / 1024.0
    );
    println!(
        "| server RSS idle, with scheduler and controllers | {:.1} MiB |",
        full_idle_rss as f64 / 1024.0
    );
    println!(
        "| server RSS holding {total} pods, API server only | {:.1} MiB |",
        full_rss as f64 / 1024.0
    );
    drop(server);
    Ok(())
}
