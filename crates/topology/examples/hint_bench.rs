//! Hint merging time per pod admission with 3 providers (CPUs, a device,
//! memory) on 16 and 64 NUMA nodes, under best-effort (the policy that merges
//! most: it must pick a non-preferred hint when nothing aligns).
//!
//! `cargo run --release -p berth-topology --example hint_bench [admissions]`
//!
//! Each admission draws free amounts per node and a request, builds each
//! provider's hints as a provider would (every satisfying mask of one or two
//! nodes, preferred when as narrow as capacity allows, plus the whole machine
//! as a non-preferred fallback), then times only the policy's merge.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use berth_topology::policy::POLICY_BEST_EFFORT;
use berth_topology::{BitMask, HintMap, NumaInfo, PolicyOptions, TopologyHint, new_policy};

struct Rng(u64);
impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Hints for a request of `want` given `free` per node and `cap` per node.
fn hints(nodes: usize, free: &[u64], cap: u64, want: u64) -> Vec<TopologyHint> {
    let min_width = want.div_ceil(cap).max(1) as usize;
    let mut out = Vec::new();
    let mut push = |bits: &[usize]| {
        let sum: u64 = bits.iter().map(|&b| free[b]).sum();
        if sum >= want {
            out.push(TopologyHint::new(
                BitMask::new(bits).unwrap(),
                bits.len() == min_width,
            ));
        }
    };
    for a in 0..nodes {
        push(&[a]);
        for b in a + 1..nodes {
            push(&[a, b]);
        }
    }
    let all: Vec<usize> = (0..nodes).collect();
    if nodes > 2 {
        push(&all);
    }
    out
}

fn main() {
    let admissions: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    println!("| NUMA nodes | admissions | merge p50 | merge p99 | max | aligned |");
    println!("|---|---|---|---|---|---|");
    for nodes in [16usize, 64] {
        let policy = new_policy(
            POLICY_BEST_EFFORT,
            NumaInfo::uniform(nodes),
            PolicyOptions::default(),
        )
        .unwrap();
        let mut rng = Rng(0x9e3779b97f4a7c15 ^ nodes as u64);
        let mut times = Vec::with_capacity(admissions);
        let mut aligned = 0;
        for _ in 0..admissions {
            // Per node: 8 CPUs, 2 devices, 16 GiB (in GiB); part of each in use.
            let cpu_free: Vec<u64> = (0..nodes).map(|_| rng.next(9)).collect();
            let dev_free: Vec<u64> = (0..nodes).map(|_| rng.next(3)).collect();
            let mem_free: Vec<u64> = (0..nodes).map(|_| rng.next(17)).collect();
            let (cpu, dev, mem) = (1 + rng.next(12), 1 + rng.next(3), 1 + rng.next(24));
            let providers: Vec<HintMap> = vec![
                BTreeMap::from([("cpu".to_string(), Some(hints(nodes, &cpu_free, 8, cpu)))]),
                BTreeMap::from([(
                    "example.com/gpu".to_string(),
                    Some(hints(nodes, &dev_free, 2, dev)),
                )]),
                BTreeMap::from([("memory".to_string(), Some(hints(nodes, &mem_free, 16, mem)))]),
            ];
            let start = Instant::now();
            let (hint, _) = policy.merge(&providers);
            times.push(start.elapsed());
            aligned += usize::from(hint.preferred);
        }
        times.sort();
        let pct = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
        let fmt = |d: Duration| format!("{:.1} µs", d.as_secs_f64() * 1e6);
        println!(
            "| {nodes} | {admissions} | {} | {} | {} | {aligned} |",
            fmt(pct(0.5)),
            fmt(pct(0.99)),
            fmt(*times.last().unwrap())
        );
    }
}
