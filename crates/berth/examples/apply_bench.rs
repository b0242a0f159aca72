//! Server-side apply benchmark: starts a real `berth server` process and drives it with
//! kube-rs over HTTPS. Prints the latency of applying a 50-container Deployment (create,
//! then re-applies changing one image each), the throughput and latency of applies of a
//! typical 1-container Deployment, and the same for strategic merge patches
//! (`kubectl set image`-like) for comparison.
//!
//! cargo build --release -p berth --bins --examples && ./target/release/examples/apply_bench
//! (BERTH_BENCH_APPLIES=N changes the 1,000; --datastore-endpoint URL may follow `--`.)

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

const CONCURRENCY: usize = 8;
const REAPPLIES: usize = 50;

fn container(i: usize, tag: usize) -> Value {
    json!({
        "name": format!("c{i}"),
        "image": format!("registry.example.com/team/app-{i}:{tag}"),
        "args": ["--port", (8000 + i).to_string()],
        "ports": [{"name": "http", "containerPort": 8000 + i, "protocol": "TCP"}],
        "env": [
            {"name": "INDEX", "value": i.to_string()},
            {"name": "MODE", "value": "bench"},
        ],
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
            "limits": {"cpu": "100m", "memory": "64Mi"}},
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8000 + i}},
    })
}

/// A Deployment of `n` containers; container `bumped` (if any) has image tag `tag`.
fn deployment(name: &str, n: usize, bumped: Option<(usize, usize)>) -> Value {
    let containers: Vec<Value> = (0..n)
        .map(|i| match bumped {
            Some((b, tag)) if b == i => container(i, tag),
            _ => container(i, 0),
        })
        .collect();
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name, "tier": "bench"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "strategy": {"type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": name, "tier": "bench"}},
                "spec": {"containers": containers, "terminationGracePeriodSeconds": 30},
            },
        },
    })
}

/// What `kubectl set image deployment/<name> c<i>=<image>` sends.
fn set_image(i: usize, tag: usize) -> Value {
    json!({"spec": {"template": {"spec": {"containers": [
        {"name": format!("c{i}"), "image": format!("registry.example.com/team/app-{i}:{tag}")}
    ]}}}})
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[derive(Clone, Copy)]
enum Op {
    /// Apply the Deployment with container image tag `.0`.
    Apply(usize),
    /// `kubectl set image` to tag `.0`.
    Strategic(usize),
}

/// Runs `op` on `bench-i` for every i in 0..n from `CONCURRENCY` tasks; returns the
/// rate per second and the sorted latencies.
async fn concurrently(
    api: &Api<Deployment>,
    n: usize,
    op: Op,
) -> anyhow::Result<(f64, Vec<Duration>)> {
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CONCURRENCY {
        let api = api.clone();
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, kube::Error>(lat);
                }
                let name = format!("bench-{i}");
                let t = Instant::now();
                match op {
                    Op::Apply(tag) => {
                        api.patch(
                            &name,
                            &PatchParams::apply("bench"),
                            &Patch::Apply(deployment(&name, 1, Some((0, tag)))),
                        )
                        .await?;
                    }
                    Op::Strategic(tag) => {
                        api.patch(
                            &name,
                            &PatchParams::default(),
                            &Patch::Strategic(set_image(0, tag)),
                        )
                        .await?;
                    }
                }
                lat.push(t.elapsed());
            }
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await??);
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    lat.sort();
    Ok((rate, lat))
}

mod bench_common;

use bench_common::percentile;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let total: usize = std::env::var("BERTH_BENCH_APPLIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let server = bench_common::BenchServer::start("apply-bench", &[]).await?;
    let client = server.client.clone();
    let api: Api<Deployment> = Api::namespaced(client, "default");
    api.list(&ListParams::default().limit(1)).await?;

    // (a) A 50-container Deployment: the creating apply, then re-applies that each
    // change one container's image.
    let big = "big";
    let t = Instant::now();
    api.patch(
        big,
        &PatchParams::apply("bench"),
        &Patch::Apply(deployment(big, 50, None)),
    )
    .await?;
    let create = t.elapsed();
    let mut reapply = Vec::with_capacity(REAPPLIES);
    for k in 0..REAPPLIES {
        let t = Instant::now();
        let out = api
            .patch(
                big,
                &PatchParams::apply("bench"),
                &Patch::Apply(deployment(big, 50, Some((k % 50, k + 1)))),
            )
            .await?;
        reapply.push(t.elapsed());
        let image = out
            .spec
            .and_then(|s| s.template.spec)
            .and_then(|p| p.containers.into_iter().nth(k % 50))
            .and_then(|c| c.image);
        anyhow::ensure!(
            image.as_deref()
                == Some(&format!(
                    "registry.example.com/team/app-{}:{}",
                    k % 50,
                    k + 1
                )),
            "re-apply {k} did not change the image"
        );
    }
    reapply.sort();

    // (c, 50 containers) the same image changes as strategic merge patches.
    let mut smp_big = Vec::with_capacity(REAPPLIES);
    for k in 0..REAPPLIES {
        let t = Instant::now();
        api.patch(
            big,
            &PatchParams::default(),
            &Patch::Strategic(set_image(k % 50, 1000 + k)),
        )
        .await?;
        smp_big.push(t.elapsed());
    }
    smp_big.sort();

    // (b) Typical 1-container Deployments, distinct names: the creating applies, then
    // re-applies changing the image.
    let (create_rate, create_lat) = concurrently(&api, total, Op::Apply(0)).await?;
    let (reapply_rate, reapply_lat) = concurrently(&api, total, Op::Apply(1)).await?;
    // (c) `kubectl set image` on each of them.
    let (smp_rate, smp_lat) = concurrently(&api, total, Op::Strategic(2)).await?;

    println!("| figure | ops/s | p50 | p99 |");
    println!("|---|---|---|---|");
    println!(
        "| apply, 50-container Deployment, create (1 request) | – | {:.1} ms | – |",
        ms(create)
    );
    println!(
        "| apply, 50-container Deployment, re-apply changing 1 image ({} sequential) | {:.0} | {:.1} ms | {:.1} ms |",
        reapply.len(),
        reapply.len() as f64 / reapply.iter().sum::<Duration>().as_secs_f64(),
        ms(percentile(&reapply, 0.5)),
        ms(percentile(&reapply, 0.99))
    );
    println!(
        "| strategic merge patch (set image), 50-container Deployment ({} sequential) | {:.0} | {:.1} ms | {:.1} ms |",
        smp_big.len(),
        smp_big.len() as f64 / smp_big.iter().sum::<Duration>().as_secs_f64(),
        ms(percentile(&smp_big, 0.5)),
        ms(percentile(&smp_big, 0.99))
    );
    for (what, rate, lat) in [
        (
            "apply (create), 1-container Deployment",
            create_rate,
            &create_lat,
        ),
        (
            "apply (re-apply changing the image), 1-container Deployment",
            reapply_rate,
            &reapply_lat,
        ),
        (
            "strategic merge patch (set image), 1-container Deployment",
            smp_rate,
            &smp_lat,
        ),
    ] {
        println!(
            "| {what}, {total} objects, {CONCURRENCY} concurrent | {rate:.0} | {:.1} ms | {:.1} ms |",
            ms(percentile(lat, 0.5)),
            ms(percentile(lat, 0.99))
        );
    }
    drop(server);
    Ok(())
}
