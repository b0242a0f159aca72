//! Scale: N simulated nodes (`berth server --simulate-nodes N`: Leases, status
//! heartbeats and pod lifecycles from the built-in simulator) and M pods held by
//! one `berth server`. Measures the time to schedule (and start) every pod, the
//! server's memory, and the latency of single-object writes while it holds them:
//! sequential ConfigMap creates and updates, pod label patches, pod GETs.
//!
//! cargo build --release -p berth --bins --examples && ./target/release/examples/scale_bench
//! (BERTH_SCALE_NODES, default 5000; BERTH_SCALE_PODS, default 150000;
//! BERTH_SCALE_CLIENTS, default 32; BERTH_SCALE_WRITES, default 1000 per kind;
//! extra arguments go to `berth server`, e.g. `--watch-cache-events 20000`)

use std::collections::HashSet;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;

mod bench_common;

use bench_common::cpu_seconds;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A small pod: 30 of them per simulated node (4 CPUs, 16Gi) fit easily.
fn pod(name: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"app": "scale"}},
        "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
    }))?)
}

fn config_map(name: &str, value: &str) -> anyhow::Result<ConfigMap> {
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "data": {"key": value}
    }))?)
}

/// Resident and peak resident memory of a process, in MiB.
fn memory_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Latencies of one kind of request, sorted.
struct Latencies {
    what: String,
    ms: Vec<f64>,
}

impl Latencies {
    fn new(what: &str, mut ms: Vec<f64>) -> Self {
        ms.sort_by(f64::total_cmp);
        Latencies {
            what: what.to_string(),
            ms,
        }
    }

    fn quantile(&self, q: f64) -> f64 {
        if self.ms.is_empty() {
            return 0.0;
        }
        let i = ((self.ms.len() as f64 * q).ceil() as usize).clamp(1, self.ms.len()) - 1;
        self.ms[i]
    }
}

/// Times `f(i)` for i in 0..n, one request after another.
async fn sequential<F, Fut>(n: usize, f: F) -> anyhow::Result<Vec<f64>>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        f(i).await?;
        out.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(out)
}

/// When each pod was first seen bound and first seen Running.
struct Progress {
    bound: Vec<Instant>,
    running: Vec<Instant>,
}

/// Follows every pod that is bound (a selector transition) until `total`
/// are bound and Running or `limit` passes.
async fn follow(
    pods: Api<Pod>,
    total: usize,
    limit: Duration,
    ready: tokio::sync::oneshot::Sender<()>,
) -> Progress {
    let stream = watcher(
        pods,
        berth_runtime::reflect::informer_config().fields("spec.nodeName!="),
    );
    let mut stream = std::pin::pin!(stream);
    let (mut bound_seen, mut running_seen) =
        (HashSet::with_capacity(total), HashSet::with_capacity(total));
    let mut p = Progress {
        bound: Vec::with_capacity(total),
        running: Vec::with_capacity(total),
    };
    let mut ready = Some(ready);
    let deadline = tokio::time::Instant::now() + limit;
    while p.running.len() < total {
        // Once every pod is bound, a minute without news ends the wait.
        let until = if p.bound.len() >= total {
            deadline.min(tokio::time::Instant::now() + Duration::from_secs(60))
        } else {
            deadline
        };
        let ev = match tokio::time::timeout_at(until, stream.next()).await {
            Ok(Some(ev)) => ev,
            Ok(None) | Err(_) => break,
        };
        match ev {
            Ok(watcher::Event::InitDone) => {
                if let Some(tx) = ready.take() {
                    let _ = tx.send(());
                }
            }
            Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                let Some(name) = pod.metadata.name.clone() else {
                    continue;
                };
                let now = Instant::now();
                if bound_seen.insert(name.clone()) {
                    p.bound.push(now);
                }
                let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
                if phase == Some("Running") && running_seen.insert(name) {
                    p.running.push(now);
                }
            }
            Ok(_) => {}
            Err(e) => eprintln!("watch: {e}"),
        }
    }
    p
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let nodes = env("BERTH_SCALE_NODES", 5000);
    let total = env("BERTH_SCALE_PODS", 150_000);
    let clients = env("BERTH_SCALE_CLIENTS", 32);
    let writes = env("BERTH_SCALE_WRITES", 1000);
    let nodes_flag = nodes.to_string();
    let server = bench_common::BenchServer::start(
        "scale-bench",
        &[
            "--simulate-nodes",
            &nodes_flag,
            "--disable-controller-manager",
        ],
    )
    .await?;
    let pid = server.child.id();
    let client = server.client.clone();
    let started = Instant::now();

    // Every simulated node registered.
    let node_api: Api<Node> = Api::all(client.clone());
    loop {
        let n = node_api
            .list_metadata(&ListParams::default())
            .await?
            .items
            .len();
        if n >= nodes {
            break;
        }
        if started.elapsed() > Duration::from_secs(600) {
            anyhow::bail!("only {n} of {nodes} nodes registered in 10 minutes");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let nodes_ready = started.elapsed();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (rss_nodes, _) = memory_mib(pid);
    eprintln!(
        "{nodes} nodes registered in {:.1} s; server RSS {rss_nodes:.0} MiB",
        nodes_ready.as_secs_f64()
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let watch = tokio::spawn(follow(
        pods.clone(),
        total,
        Duration::from_secs(3600),
        ready_tx,
    ));
    ready_rx.await?;
    let cpu_before = cpu_seconds(pid);
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
    eprintln!(
        "{total} pods created in {:.1} s",
        pods_created.as_secs_f64()
    );
    let progress = watch.await?;
    let all_bound = progress.bound.last().map(|t| *t - started);
    let all_running = progress.running.last().map(|t| *t - started);
    let cpu_pods = cpu_seconds(pid) - cpu_before;
    let (bound, running) = (progress.bound.len(), progress.running.len());
    eprintln!("{bound} pods bound, {running} running");
    // Let the burst's garbage go before measuring what the server holds.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let (rss_loaded, _) = memory_mib(pid);

    // Single-object writes against the loaded server, one at a time.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let api = cms.clone();
    let creates = sequential(writes, |i| {
        let api = api.clone();
        async move {
            api.create(
                &PostParams::default(),
                &config_map(&format!("cm-{i}"), "a")?,
            )
            .await?;
            Ok(())
        }
    })
    .await?;
    let api = cms.clone();
    let updates = sequential(writes, |i| {
        let api = api.clone();
        async move {
            // A replace without a resourceVersion: an unconditional update.
            api.replace(
                &format!("cm-{i}"),
                &PostParams::default(),
                &config_map(&format!("cm-{i}"), "b")?,
            )
            .await?;
            Ok(())
        }
    })
    .await?;
    let api = pods.clone();
    let step = (total / writes.max(1)).max(1);
    let patches = sequential(writes.min(total), |i| {
        let api = api.clone();
        async move {
            let patch = serde_json::json!({"metadata": {"labels": {"patched": i.to_string()}}});
            api.patch(
                &format!("p-{}", (i * step) % total),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
            Ok(())
        }
    })
    .await?;
    let api = pods.clone();
    let gets = sequential(writes.min(total), |i| {
        let api = api.clone();
        async move {
            api.get(&format!("p-{}", (i * step + 1) % total)).await?;
            Ok(())
        }
    })
    .await?;
    let (rss_end, peak) = memory_mib(pid);
    drop(server);

    let secs =
        |d: Option<Duration>| d.map_or("—".to_string(), |d| format!("{:.1} s", d.as_secs_f64()));
    println!("| what | value |");
    println!("|---|---|");
    println!(
        "| simulated nodes | {nodes} (registered in {:.1} s) |",
        nodes_ready.as_secs_f64()
    );
    println!(
        "| pods created ({clients} clients) | {total} in {:.1} s ({:.0}/s) |",
        pods_created.as_secs_f64(),
        total as f64 / pods_created.as_secs_f64()
    );
    println!(
        "| first create → last bound | {} ({bound} bound{}) |",
        secs(all_bound),
        all_bound.map_or(String::new(), |d| format!(
            ", {:.0} pods/s",
            bound as f64 / d.as_secs_f64()
        ))
    );
    println!(
        "| first create → last Running | {} ({running} Running) |",
        secs(all_running)
    );
    println!(
        "| server CPU while creating and starting pods | {cpu_pods:.0} s ({:.2} ms per pod) |",
        cpu_pods * 1000.0 / total.max(1) as f64
    );
    println!(
        "| server RSS: nodes only / {total} pods / after the write tests | {rss_nodes:.0} / {rss_loaded:.0} / {rss_end:.0} MiB (peak {peak:.0} MiB) |"
    );
    println!();
    println!("| single-object request, loaded, sequential ({writes} each) | p50 | p99 | max |");
    println!("|---|---|---|---|");
    for l in [
        Latencies::new("ConfigMap create", creates),
        Latencies::new("ConfigMap update (PUT)", updates),
        Latencies::new("Pod label patch (merge)", patches),
        Latencies::new("Pod GET", gets),
    ] {
        println!(
            "| {} | {:.1} ms | {:.1} ms | {:.1} ms |",
            l.what,
            l.quantile(0.5),
            l.quantile(0.99),
            l.quantile(1.0)
        );
    }
    Ok(())
}
