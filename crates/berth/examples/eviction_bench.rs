//! Eviction reaction time: from a memory threshold crossed to the first pod
//! killed, p50/p90 over 10 runs, against upstream's 10 s housekeeping interval.
//!
//! Driving a real crossing 10 times takes minutes of a loaded machine per run,
//! so this drives the eviction manager's own loop (`eviction::manager::run`,
//! the code the node agent runs) with fake stats: a stats provider whose node
//! memory drops below `memory.available<100Mi` at a random moment, and a pod
//! killer that records when it is asked to kill. The kill itself (a pod worker
//! stopping containers with grace 0) is not in the figure; the e2e suite
//! `tests/eviction.rs` prints what a real one takes. Also: the cost of one
//! manager cycle (observations, thresholds, ranking 110 pods, the message).
//!
//! cargo run --release -p berth --example eviction_bench (a debug build gives the same
//! reaction times: they are the housekeeping period's; only the cycle cost differs)
//! (BERTH_EVICTION_RUNS, default 10; BERTH_EVICTION_HOUSEKEEPING_MS, default 10000)

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_kubelet::eviction::manager::{NoReclaim, PodKiller, State, SummaryProvider, run};
use berth_kubelet::eviction::{Condition, Config, PodEviction, Settings};
use berth_kubelet::stats::summary::{
    ContainerStats, MemoryStats, NodeStats, PodReference, PodStats, Summary,
};
use k8s_openapi::api::core::v1::Pod;

const MI: u64 = 1 << 20;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pods(n: usize) -> Vec<Pod> {
    (0..n)
        .map(|i| {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": format!("p{i}"), "namespace": "default", "uid": format!("u{i}")},
                "spec": {"containers": [{"name": "c", "image": "busybox",
                    "resources": if i % 3 == 0 { serde_json::json!({}) }
                                 else { serde_json::json!({"requests": {"memory": "64Mi"}}) }}]},
                "status": {"phase": "Running"}
            }))
            .expect("pod")
        })
        .collect()
}

fn summary(available: u64, n: usize) -> Summary {
    let mem = |ws: u64| {
        Some(MemoryStats {
            time: Some(chrono::Utc::now()),
            working_set_bytes: Some(ws),
            ..Default::default()
        })
    };
    Summary {
        node: NodeStats {
            memory: Some(MemoryStats {
                available_bytes: Some(available),
                ..mem(8 << 30).unwrap()
            }),
            ..Default::default()
        },
        pods: (0..n)
            .map(|i| PodStats {
                pod_ref: PodReference {
                    name: format!("p{i}"),
                    namespace: "default".into(),
                    uid: format!("u{i}"),
                },
                containers: vec![ContainerStats {
                    name: "c".into(),
                    memory: mem((i as u64 + 1) * MI),
                    ..Default::default()
                }],
                memory: mem((i as u64 + 1) * MI),
                ..Default::default()
            })
            .collect(),
    }
}

/// Node memory that falls below the threshold at `cross_at`.
struct FakeStats {
    cross_at: Instant,
    pods: usize,
}

/// The traits are `async_trait`s; written out by hand here.
type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

impl SummaryProvider for FakeStats {
    fn summary<'life0, 'async_trait>(&'life0 self) -> BoxFuture<'async_trait, Option<Summary>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let available = if Instant::now() >= self.cross_at {
            50 * MI
        } else {
            4 << 30
        };
        let s = summary(available, self.pods);
        Box::pin(async move { Some(s) })
    }
}

struct Killer {
    pods: Vec<Pod>,
    killed: Mutex<Option<Instant>>,
}

impl PodKiller for Killer {
    fn active_pods(&self) -> Vec<Pod> {
        self.pods.clone()
    }
    fn evict<'life0, 'life1, 'async_trait>(
        &'life0 self,
        _uid: &'life1 str,
        _e: PodEviction,
        _t: Duration,
    ) -> BoxFuture<'async_trait, bool>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        self.killed.lock().unwrap().get_or_insert(Instant::now());
        Box::pin(async { true })
    }
    fn set_conditions(&self, _c: &[Condition]) {}
}

fn config(housekeeping: Duration) -> Config {
    Settings {
        housekeeping_interval: housekeeping,
        ..Default::default()
    }
    .config()
    .expect("default thresholds")
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let runs = env("BERTH_EVICTION_RUNS", 10) as usize;
    let housekeeping = Duration::from_millis(env("BERTH_EVICTION_HOUSEKEEPING_MS", 10_000));
    let n = 110;

    // One cycle's cost (synchronize over 110 pods, eviction picked).
    let cfg = config(housekeeping);
    let objs = pods(n);
    let refs: Vec<&Pod> = objs.iter().collect();
    let low = summary(50 * MI, n);
    let rounds = 200;
    let t = Instant::now();
    for _ in 0..rounds {
        let mut state = State::default();
        let d = state.synchronize(&cfg, &low, &refs, Instant::now());
        assert!(d.evict.is_some());
    }
    let per_cycle = t.elapsed() / rounds;
    eprintln!("one cycle over {n} pods: {per_cycle:?}");

    let mut reactions = Vec::new();
    for i in 0..runs {
        // The crossing lands anywhere in the housekeeping period, as in life.
        let phase = housekeeping.mul_f64(((i as f64 * 0.618_034) % 1.0).max(0.001));
        let cross_at = Instant::now() + phase;
        let killer = Arc::new(Killer {
            pods: pods(n),
            killed: Mutex::new(None),
        });
        let task = tokio::spawn(run(
            config(housekeeping),
            Arc::new(FakeStats { cross_at, pods: n }),
            killer.clone(),
            Arc::new(NoReclaim),
        ));
        let killed = loop {
            if let Some(k) = *killer.killed.lock().unwrap() {
                break k;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        task.abort();
        let r = killed.saturating_duration_since(cross_at);
        eprintln!("run {i}: crossed {phase:?} into the period, killed {r:?} later");
        reactions.push(r);
    }
    let p50 = percentile(&mut reactions, 0.5);
    let p90 = percentile(&mut reactions, 0.9);
    println!("| figure | value |");
    println!("|---|---|");
    println!("| eviction manager cycle ({n} pods) | {per_cycle:?} |");
    println!(
        "| threshold crossed → first pod killed, {runs} runs (housekeeping {housekeeping:?}; upstream's 10 s) | p50 {p50:?}, p90 {p90:?}, max {:?} |",
        reactions.last().unwrap()
    );
}
