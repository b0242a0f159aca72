//! The seed's limit (2) of upstream's Topology Manager, measured: the default
//! scheduler is not topology-aware, so it sends pods to nodes whose
//! `single-numa-node` admission then rejects them. 100 simulated nodes with 2
//! NUMA cells (4 CPUs and 1 `example.com/gpu` each): on the 50 nodes of group
//! `a` a 3-CPU+GPU pod and a 3-CPU pod leave 1 free CPU per cell (2 on the
//! node, with 1 GPU), the 50 of group `b` are empty. Then 100 Guaranteed pods
//! of 2 CPUs + 1 GPU that prefer group `a` (a soft node affinity): they fit
//! group `a`'s totals but none of its cells. One run with the default filters
//! and one with NodeResourceTopologyMatch enabled; prints the pods' fate.
//!
//! `cargo run --release -p berth --example numa_bench`

#[path = "bench_common/mod.rs"]
mod bench_common;

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

const NODES: usize = 100;
const WORKLOAD: usize = 100;
const FILTER_ON: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    filter:
      enabled:
      - name: NodeResourceTopologyMatch
";

fn pod(name: &str, cpu: &str, gpu: bool, node: Option<String>) -> anyhow::Result<Pod> {
    let mut r = json!({"cpu": cpu, "memory": "1Gi"});
    if gpu {
        r["example.com/gpu"] = json!("1");
    }
    let mut spec = json!({
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": r, "limits": r}}],
    });
    match node {
        Some(n) => spec["nodeName"] = json!(n),
        None => {
            spec["affinity"] = json!({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": [{"key": "group", "operator": "In", "values": ["a"]}]}}
            ]}});
        }
    }
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }))?)
}

#[derive(Default, Debug)]
struct Fate {
    running: usize,
    topology_affinity_error: usize,
    pending: usize,
    other: usize,
    seconds: f64,
    /// Why one pod is still Pending, as the scheduler wrote it.
    pending_reason: String,
}

fn sim(first: usize, group: &str) -> berth_kubelet::sim::SimConfig {
    use berth_kubelet::node::{parse_resources, topology::split_evenly};
    let capacity =
        parse_resources("cpu=8,memory=32Gi,example.com/gpu=2,pods=110").unwrap_or_default();
    let mut cfg = berth_kubelet::sim::SimConfig {
        count: NODES / 2,
        first_index: first,
        numa: split_evenly(2, &capacity).unwrap_or_default(),
        capacity,
        topology_manager_policy: "single-numa-node".into(),
        start_delay: Duration::from_millis(200),
        ..Default::default()
    };
    cfg.labels.insert("group".into(), group.into());
    cfg
}

async fn run(filter_on: bool) -> anyhow::Result<Fate> {
    let tag = if filter_on { "numa-on" } else { "numa-off" };
    let config = std::env::temp_dir().join(format!("berth-{tag}-{}.yaml", std::process::id()));
    let mut flags: Vec<String> = Vec::new();
    if filter_on {
        std::fs::write(&config, FILTER_ON)?;
        flags.push("--scheduler-config".into());
        flags.push(config.display().to_string());
    }
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let server = bench_common::BenchServer::start(tag, &flags).await?;
    let client = server.client.clone();
    for (first, group) in [(0, "a"), (NODES / 2, "b")] {
        let (c, cfg) = (client.clone(), sim(first, group));
        tokio::spawn(async move {
            if let Err(e) = berth_kubelet::sim::Simulator::run(c, cfg).await {
                eprintln!("simulator: {e}");
            }
        });
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    while nodes.list(&ListParams::default()).await?.items.len() < NODES {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Group a's cells: 3 CPUs + the GPU on cell 0, 3 CPUs on cell 1.
    for i in 0..NODES / 2 {
        let node = format!("sim-node-{i}");
        pods.create(
            &PostParams::default(),
            &pod(&format!("x-{i}"), "3", true, Some(node.clone()))?,
        )
        .await?;
        pods.create(
            &PostParams::default(),
            &pod(&format!("y-{i}"), "3", false, Some(node))?,
        )
        .await?;
    }
    let list = |p: Api<Pod>| async move {
        let all = p.list(&ListParams::default()).await?.items;
        anyhow::Ok(all)
    };
    // Wait for them to run and for the nodes to publish it.
    loop {
        let all = list(pods.clone()).await?;
        let running = all
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if running == NODES {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    let started = Instant::now();
    for i in 0..WORKLOAD {
        pods.create(
            &PostParams::default(),
            &pod(&format!("w-{i}"), "2", true, None)?,
        )
        .await?;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut fate;
    loop {
        fate = Fate::default();
        for p in list(pods.clone()).await? {
            if !p
                .metadata
                .name
                .as_deref()
                .unwrap_or_default()
                .starts_with("w-")
            {
                continue;
            }
            let st = p.status.unwrap_or_default();
            match (st.phase.as_deref(), st.reason.as_deref()) {
                (Some("Running"), _) => fate.running += 1,
                (Some("Failed"), Some("TopologyAffinityError")) => {
                    fate.topology_affinity_error += 1
                }
                (Some("Pending") | None, _) => {
                    fate.pending += 1;
                    fate.pending_reason = st
                        .conditions
                        .iter()
                        .flatten()
                        .find(|c| c.type_ == "PodScheduled")
                        .and_then(|c| c.message.clone())
                        .unwrap_or_default();
                }
                _ => fate.other += 1,
            }
        }
        // Settled: every pod ran or failed, or the rest stay Pending.
        if fate.pending == 0 || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    fate.seconds = started.elapsed().as_secs_f64();
    drop(server);
    let _ = std::fs::remove_file(&config);
    Ok(fate)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let off = run(false).await?;
    let on = run(true).await?;
    println!(
        "{NODES} simulated nodes (2 NUMA cells, single-numa-node), {WORKLOAD} pods of 2 CPUs + 1 GPU preferring the fragmented half\n"
    );
    println!("| figure | value |");
    println!("|---|---|");
    for (name, f) in [
        ("default filters", &off),
        ("NodeResourceTopologyMatch", &on),
    ] {
        println!(
            "| {name}: Running / TopologyAffinityError / Pending / other | {} / {} / {} / {} (settled in {:.1} s) |",
            f.running, f.topology_affinity_error, f.pending, f.other, f.seconds
        );
        if f.pending > 0 {
            println!("| {name}: why Pending | {} |", f.pending_reason);
        }
    }
    Ok(())
}
