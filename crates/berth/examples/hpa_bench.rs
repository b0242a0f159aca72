//! Autoscaling at scale over simulated nodes (`--simulate-nodes`, whose pods
//! report synthetic usage from their `sim.berth.dev/cpu` annotation and are
//! scraped by the metrics server like real nodes):
//!
//! 1. The metrics pipeline: the bytes of one simulated node's
//!    `/metrics/resource` with 100 pods, the time to serve it, and the metrics
//!    server's cost to decode and store one scrape of it (measured in this
//!    process on the same text, 200 rounds).
//! 2. The HPA controller: N Deployments of one pod each, then N HPAs; the
//!    server's CPU per 15 s sync period without and with the HPAs (the
//!    difference is what the HPAs cost: syncs, metrics queries, scale reads,
//!    status writes), then a load change on every pod and the time until
//!    every HPA has scaled its Deployment.
//!
//! cargo build --release -p berth --bins --examples && ./target/release/examples/hpa_bench
//! (BERTH_HPA_COUNT, default 1000; BERTH_HPA_NODES, default 20; BERTH_HPA_PER_NAMESPACE,
//! default 20: the Deployments and HPAs are spread over namespaces, as tenants' are)

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

mod bench_common;

use bench_common::{concurrently, cpu_seconds};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn deployment(name: &str, node: &str) -> anyhow::Result<Deployment> {
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}, "annotations": {"sim.berth.dev/cpu": "50m"}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "100m", "memory": "16Mi"}}}]
                }
            }
        }
    }))?)
}

fn hpa(name: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": 1, "maxReplicas": 3,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 60}}}]
        }
    })
}

async fn wait_for(
    what: &str,
    limit: Duration,
    mut f: impl AsyncFnMut() -> bool,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if f().await {
            return Ok(started.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    anyhow::bail!("timed out waiting for {what}")
}

/// Server CPU seconds used over `periods` sync periods of 15 s.
async fn cpu_per_period(pid: u32, periods: u32) -> f64 {
    let before = cpu_seconds(pid);
    tokio::time::sleep(Duration::from_secs(15 * u64::from(periods))).await;
    (cpu_seconds(pid) - before) / f64::from(periods)
}

/// GET over HTTPS without verifying the simulator's self-signed certificate.
async fn get_insecure(url: &str) -> anyhow::Result<(Duration, String)> {
    let started = Instant::now();
    let out = tokio::process::Command::new("curl")
        .args(["-sk", url])
        .output()
        .await?;
    Ok((
        started.elapsed(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let count = env("BERTH_HPA_COUNT", 1000);
    let nodes = env("BERTH_HPA_NODES", 20);
    let per_ns = env("BERTH_HPA_PER_NAMESPACE", 20).max(1);
    let ns_of = move |i: usize| format!("ns-{}", i / per_ns);
    let server = bench_common::BenchServer::start(
        "hpa-bench",
        &[
            "--simulate-nodes",
            &nodes.to_string(),
            "--sim-node-capacity",
            "cpu=64,memory=256Gi,pods=500",
        ],
    )
    .await?;
    let pid = server.child.id();
    let client = server.client.clone();
    let node_api: Api<Node> = Api::all(client.clone());
    wait_for("simulated nodes", Duration::from_secs(60), async || {
        node_api
            .list(&ListParams::default())
            .await
            .map(|l| l.items.len() >= nodes)
            .unwrap_or(false)
    })
    .await?;

    // The namespaces, each with the `default` ServiceAccount pods need.
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns_count = count.div_ceil(per_ns);
    for n in 0..ns_count {
        let ns: Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": format!("ns-{n}")}}))?;
        namespaces.create(&PostParams::default(), &ns).await?;
    }
    for n in 0..ns_count {
        let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(client.clone(), &format!("ns-{n}"));
        wait_for(
            "default ServiceAccounts",
            Duration::from_secs(60),
            async || sas.get_opt("default").await.ok().flatten().is_some(),
        )
        .await?;
    }
    // The pods: spread evenly, the first node holding 100 of them for part 1.
    let deployments: Api<Deployment> = Api::all(client.clone());
    let first = 100.min(count);
    {
        let c = client.clone();
        concurrently(count, 32, move |i| {
            let d: Api<Deployment> = Api::namespaced(c.clone(), &ns_of(i));
            async move {
                let node = if i < first {
                    0
                } else {
                    1 + i % (nodes - 1).max(1)
                };
                d.create(
                    &PostParams::default(),
                    &deployment(&format!("app-{i}"), &format!("sim-node-{node}"))?,
                )
                .await?;
                Ok(())
            }
        })
        .await?;
    }
    let pods: Api<Pod> = Api::all(client.clone());
    let took = wait_for("every pod running", Duration::from_secs(600), async || {
        pods.list(&ListParams::default())
            .await
            .map(|l| {
                l.items
                    .iter()
                    .filter(|p| {
                        p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    })
                    .count()
                    >= count
            })
            .unwrap_or(false)
    })
    .await?;
    println!("{count} pods running on {nodes} simulated nodes after {took:.1?}");

    // Part 1: one node's scrape with 100 pods.
    let node0 = node_api.get("sim-node-0").await?;
    let endpoint = node0
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("sim.berth.dev/stats-endpoint"))
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("sim-node-0 publishes no stats endpoint"))?;
    let mut serve_times = Vec::new();
    let mut body = String::new();
    for _ in 0..20 {
        let (t, b) = get_insecure(&format!("{endpoint}/metrics/resource")).await?;
        serve_times.push(t);
        body = b;
    }
    serve_times.sort();
    let pods_in_scrape = body
        .lines()
        .filter(|l| l.starts_with("pod_cpu_usage_seconds_total{"))
        .count();
    let rounds = 200;
    let mut storage = berth_metrics::storage::Storage::new(Duration::from_secs(15));
    let started = Instant::now();
    for r in 0..rounds {
        let batch = berth_metrics::decode::decode(&body, 1_700_000_000_000 + r * 15_000)?;
        storage.store(vec![("sim-node-0".to_string(), batch)]);
    }
    let per_scrape = started.elapsed() / rounds as u32;
    println!(
        "scrape of one node with {pods_in_scrape} pods: {} bytes; served in p50 {:.1?} (curl, incl. TLS); decode+store {per_scrape:.1?} CPU",
        body.len(),
        bench_common::percentile(&serve_times, 0.5)
    );

    // Part 2: the HPA controller.
    wait_for(
        "pod metrics for every pod",
        Duration::from_secs(120),
        async || {
            let raw = client
                .request_text(
                    http::Request::get("/apis/metrics.k8s.io/v1beta1/pods")
                        .body(vec![])
                        .unwrap_or_default(),
                )
                .await
                .unwrap_or_default();
            serde_json::from_str::<serde_json::Value>(&raw)
                .ok()
                .and_then(|v| v["items"].as_array().map(|i| i.len() >= count))
                .unwrap_or(false)
        },
    )
    .await?;
    // Let the Deployments' rollouts settle before the baseline.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let base = cpu_per_period(pid, 4).await;
    println!("server CPU per 15 s period, {count} pods, no HPAs: {base:.3} s");
    let hpa_resource = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("autoscaling", "v2", "HorizontalPodAutoscaler"),
        "horizontalpodautoscalers",
    );
    let hpas: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &hpa_resource);
    {
        let c = client.clone();
        concurrently(count, 32, move |i| {
            let h: Api<kube::api::DynamicObject> =
                Api::namespaced_with(c.clone(), &ns_of(i), &hpa_resource);
            async move {
                let obj: kube::api::DynamicObject =
                    serde_json::from_value(hpa(&format!("app-{i}")))?;
                h.create(&PostParams::default(), &obj).await?;
                Ok(())
            }
        })
        .await?;
    }
    let synced = wait_for(
        "every HPA reporting a metric",
        Duration::from_secs(120),
        async || {
            hpas.list(&ListParams::default())
                .await
                .map(|l| {
                    l.items
                        .iter()
                        .filter(|h| {
                            h.data["status"]["currentMetrics"]
                                .as_array()
                                .is_some_and(|m| !m.is_empty())
                        })
                        .count()
                        >= count
                })
                .unwrap_or(false)
        },
    )
    .await?;
    println!("{count} HPAs created; all reporting metrics after {synced:.1?}");
    let with = cpu_per_period(pid, 4).await;
    println!(
        "server CPU per 15 s period with {count} HPAs: {with:.3} s (HPAs: {:.3} s per period, {:.2} ms per HPA sync)",
        with - base,
        (with - base) * 1000.0 / count as f64
    );

    // The load change: every pod now uses 200m of its 100m request (target
    // 60 %): each HPA scales its Deployment to its maximum, 3.
    let changed = Instant::now();
    let list = pods.list(&ListParams::default()).await?;
    let names: Vec<(String, String)> = list
        .items
        .iter()
        .filter_map(|p| Some((p.metadata.namespace.clone()?, p.metadata.name.clone()?)))
        .collect();
    {
        let c = client.clone();
        let names = std::sync::Arc::new(names);
        concurrently(names.len(), 32, move |i| {
            let (c, names) = (c.clone(), names.clone());
            async move {
                let (ns, name) = &names[i];
                let p: Api<Pod> = Api::namespaced(c, ns);
                let patch =
                    serde_json::json!({"metadata": {"annotations": {"sim.berth.dev/cpu": "200m"}}});
                p.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                Ok(())
            }
        })
        .await?;
    }
    let patched = changed.elapsed();
    let mut first_seen: BTreeMap<String, Duration> = BTreeMap::new();
    wait_for(
        "every Deployment scaled",
        Duration::from_secs(300),
        async || {
            if let Ok(l) = deployments.list(&ListParams::default()).await {
                for d in l.items {
                    if d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0) > 1 {
                        let key = format!(
                            "{}/{}",
                            d.metadata.namespace.unwrap_or_default(),
                            d.metadata.name.unwrap_or_default()
                        );
                        first_seen.entry(key).or_insert_with(|| changed.elapsed());
                    }
                }
            }
            first_seen.len() >= count
        },
    )
    .await?;
    let mut times: Vec<Duration> = first_seen.values().copied().collect();
    times.sort();
    println!(
        "load change on {count} pods (patched in {patched:.1?}): every HPA scaled after {:.1?} (p50 {:.1?}, first {:.1?}); metric resolution and sync period are 15 s each",
        times.last().copied().unwrap_or_default(),
        bench_common::percentile(&times, 0.5),
        times.first().copied().unwrap_or_default(),
    );
    Ok(())
}
