//! Table tests of the eviction manager on fake stats.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use super::manager::{State, grace_period};
use super::message::{evicted_status, eviction_message, node_condition_message};
use super::ranking::{pod_request, rank, stats_by_uid};
use super::signals::*;
use super::*;
use crate::node::EvictionThreshold;
use crate::stats::summary::*;

const MI: u64 = 1 << 20;

fn flags(hard: &str) -> EvictionFlags {
    EvictionFlags {
        hard: EvictionThreshold::parse_list(hard).unwrap(),
        ..Default::default()
    }
}

/// A pod: `requests`/`limits` memory per container (`""` for none).
fn pod(name: &str, request: &str, limit: &str, priority: i32) -> Pod {
    let mut res = json!({});
    if !request.is_empty() {
        res["requests"] = json!({"memory": request});
    }
    if !limit.is_empty() {
        res["limits"] = json!({"memory": limit});
    }
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"priority": priority, "containers": [{"name": "c", "image": "busybox", "resources": res}]},
        "status": {"phase": "Running"},
    }))
    .unwrap()
}

fn pod_stats(name: &str, working_set: u64) -> PodStats {
    let mem = Some(MemoryStats {
        working_set_bytes: Some(working_set),
        ..Default::default()
    });
    PodStats {
        pod_ref: PodReference {
            name: name.into(),
            namespace: "default".into(),
            uid: format!("uid-{name}"),
        },
        containers: vec![ContainerStats {
            name: "c".into(),
            memory: mem.clone(),
            ..Default::default()
        }],
        memory: mem,
        ..Default::default()
    }
}

fn summary(available: u64, working_set: u64, pods: Vec<PodStats>) -> Summary {
    Summary {
        node: NodeStats {
            memory: Some(MemoryStats {
                time: Some(chrono::Utc::now()),
                available_bytes: Some(available),
                working_set_bytes: Some(working_set),
                ..Default::default()
            }),
            fs: Some(FsStats {
                time: Some(chrono::Utc::now()),
                available_bytes: Some(50 << 30),
                capacity_bytes: Some(100 << 30),
                inodes_free: Some(900),
                inodes: Some(1000),
                ..Default::default()
            }),
            rlimit: Some(RlimitStats {
                time: Some(chrono::Utc::now()),
                max_pid: Some(4096),
                num_of_running_processes: Some(100),
            }),
            ..Default::default()
        },
        pods,
    }
}

#[test]
fn thresholds_parse_as_upstream_flags() {
    let t = thresholds(&flags(
        "memory.available<100Mi,nodefs.available<10%,imagefs.available<15%,nodefs.inodesFree<5%",
    ))
    .unwrap();
    assert_eq!(t.len(), 4);
    assert!(t.iter().all(Threshold::is_hard));
    assert_eq!(t[0].signal, Signal::MemoryAvailable);
    assert_eq!(t[3].signal, Signal::NodeFsInodesFree);

    let mut f = flags("");
    f.soft = EvictionThreshold::parse_list("memory.available<1Gi").unwrap();
    let err = thresholds(&f).unwrap_err().to_string();
    assert!(
        err.contains(
            "grace period must be specified for the soft eviction threshold memory.available"
        ),
        "{err}"
    );
    f.soft_grace_period = parse_map("memory.available=1m30s").unwrap();
    f.minimum_reclaim = parse_map("memory.available=500Mi").unwrap();
    let t = thresholds(&f).unwrap();
    assert_eq!(t[0].grace_period, Duration::from_secs(90));
    assert!(!t[0].is_hard());
    assert_eq!(
        t[0].min_reclaim,
        Some(crate::node::ThresholdValue::Quantity(
            berth_api::quantity::Quantity::parse("500Mi").unwrap()
        ))
    );

    for (bad, why) in [
        ("memory.free<1Gi", "unsupported eviction signal memory.free"),
        (
            "memory.available<1Gi,memory.available<2Gi",
            "found duplicate eviction threshold for signal memory.available",
        ),
        ("memory.available<-1Gi", "must be positive"),
    ] {
        let err = thresholds(&flags(bad)).unwrap_err().to_string();
        assert!(err.contains(why), "{bad}: {err}");
    }
    assert_eq!(parse_go_duration("5m"), Some(Duration::from_secs(300)));
    assert_eq!(parse_go_duration("1h2m3s"), Some(Duration::from_secs(3723)));
    assert_eq!(parse_go_duration("500ms"), Some(Duration::from_millis(500)));
    assert_eq!(parse_go_duration("5x"), None);
}

#[test]
fn observations_from_the_summary() {
    let o = observations(&summary(95 * MI, 900 * MI, vec![]));
    let m = &o[&Signal::MemoryAvailable];
    assert_eq!((m.available, m.capacity), (95 << 20, 995 << 20));
    assert_eq!(o[&Signal::NodeFsAvailable].available, 50 << 30);
    assert_eq!(o[&Signal::NodeFsInodesFree].capacity, 1000);
    assert_eq!(o[&Signal::PidAvailable].available, 3996);
    assert!(!o.contains_key(&Signal::ImageFsAvailable));
}

#[test]
fn memory_ranking_exceeds_requests_then_priority_then_usage() {
    // (name, request, limit, priority, working set MiB), expected order.
    type Case<'a> = (&'a [(&'a str, &'a str, &'a str, i32, u64)], &'a [&'a str]);
    let cases: &[Case] = &[
        // The seed's order: BestEffort, then Burstable over its request; the
        // Guaranteed pod under its request goes last.
        (
            &[
                ("guaranteed", "500Mi", "500Mi", 0, 400),
                ("burstable", "64Mi", "1Gi", 0, 800),
                ("besteffort", "", "", 0, 1200),
            ],
            &["besteffort", "burstable", "guaranteed"],
        ),
        // Exceeding requests comes before using more.
        (
            &[
                ("big-under", "2Gi", "", 0, 1500),
                ("small-over", "", "", 0, 10),
            ],
            &["small-over", "big-under"],
        ),
        // Among pods over their requests, lower priority first.
        (
            &[("low", "", "", 0, 10), ("high", "", "", 1000, 900)],
            &["low", "high"],
        ),
        // Same priority: the larger usage above request first.
        (
            &[("a", "100Mi", "", 0, 400), ("b", "10Mi", "", 0, 250)],
            &["a", "b"],
        ),
    ];
    for (pods, want) in cases {
        let objs: Vec<Pod> = pods.iter().map(|p| pod(p.0, p.1, p.2, p.3)).collect();
        let stats: Vec<PodStats> = pods.iter().map(|p| pod_stats(p.0, p.4 * MI)).collect();
        let by = stats_by_uid(&stats);
        let mut refs: Vec<&Pod> = objs.iter().collect();
        rank(&mut refs, Signal::MemoryAvailable, &by);
        let got: Vec<&str> = refs
            .iter()
            .map(|p| p.metadata.name.as_deref().unwrap())
            .collect();
        assert_eq!(&got, want);
    }
}

#[test]
fn a_pod_without_stats_goes_first() {
    let objs = [pod("seen", "", "", 0), pod("unseen", "1Gi", "1Gi", 1000)];
    let stats = vec![pod_stats("seen", 500 * MI)];
    let by = stats_by_uid(&stats);
    let mut refs: Vec<&Pod> = objs.iter().collect();
    rank(&mut refs, Signal::MemoryAvailable, &by);
    assert_eq!(refs[0].metadata.name.as_deref(), Some("unseen"));
}

#[test]
fn pid_and_disk_ranking() {
    let objs = [
        pod("few", "", "", 0),
        pod("many", "", "", 0),
        pod("vip", "", "", 10),
    ];
    let mut stats: Vec<PodStats> = ["few", "many", "vip"]
        .iter()
        .map(|n| pod_stats(n, MI))
        .collect();
    for (s, n) in stats.iter_mut().zip([5u64, 50, 500]) {
        s.process_stats = Some(ProcessStats {
            process_count: Some(n),
        });
        s.ephemeral_storage = Some(FsStats {
            used_bytes: Some(n * MI),
            inodes_used: Some(n),
            ..Default::default()
        });
    }
    let by = stats_by_uid(&stats);
    let order = |signal| {
        let mut refs: Vec<&Pod> = objs.iter().collect();
        rank(&mut refs, signal, &by);
        refs.iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(order(Signal::PidAvailable), ["many", "few", "vip"]);
    assert_eq!(order(Signal::NodeFsAvailable), ["many", "few", "vip"]);
    assert_eq!(order(Signal::NodeFsInodesFree), ["many", "few", "vip"]);
}

#[test]
fn pod_requests_count_init_containers_sidecars_and_overhead() {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "uid": "u"},
        "spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"memory": "100Mi"}}},
                {"name": "b", "resources": {"requests": {"memory": "50Mi"}}}
            ],
            "initContainers": [
                {"name": "big", "resources": {"requests": {"memory": "300Mi"}}},
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"memory": "10Mi"}}}
            ],
            "overhead": {"memory": "5Mi"}
        }
    }))
    .unwrap();
    // max(100+50+10, 300) + 5.
    assert_eq!(pod_request(&p, "memory").canonical(), "305Mi");
    assert_eq!(pod_request(&p, "cpu").canonical(), "0");
}

#[test]
fn the_seed_order_through_the_manager() {
    let mut cfg = Config::new(thresholds(&flags("memory.available<1Gi")).unwrap());
    cfg.pressure_transition_period = Duration::from_secs(20);
    let objs = [
        pod("guaranteed", "500Mi", "500Mi", 0),
        pod("burstable", "64Mi", "1Gi", 0),
        pod("besteffort", "", "", 0),
    ];
    let mut state = State::default();
    let t0 = Instant::now();
    let refs: Vec<&Pod> = objs.iter().collect();

    // Plenty available: nothing.
    let s = summary(
        4 << 30,
        1 << 30,
        vec![
            pod_stats("guaranteed", 10 * MI),
            pod_stats("besteffort", MI),
        ],
    );
    let d = state.synchronize(&cfg, &s, &refs, t0);
    assert!(d.conditions.is_empty() && d.evict.is_none());

    // Below 1Gi: the BestEffort pod goes, with upstream's message.
    let stats = vec![
        pod_stats("guaranteed", 400 * MI),
        pod_stats("burstable", 800 * MI),
        pod_stats("besteffort", 1200 * MI),
    ];
    let d = state.synchronize(&cfg, &summary(950 * MI, 3 << 30, stats), &refs, t0);
    assert_eq!(d.conditions, [Condition::MemoryPressure]);
    let (uid, ev) = d.evict.unwrap();
    assert_eq!(uid, "uid-besteffort");
    assert_eq!(ev.grace, Duration::ZERO);
    assert_eq!(
        ev.message,
        "The node was low on resource: memory. Threshold quantity: 1Gi, available: 950Mi. \
         Container c was using 1200Mi, request is 0, has larger consumption of memory. "
    );

    // Still below: the Burstable pod over its request next.
    let refs2: Vec<&Pod> = objs[..2].iter().collect();
    let stats = vec![
        pod_stats("guaranteed", 400 * MI),
        pod_stats("burstable", 800 * MI),
    ];
    let t1 = t0 + Duration::from_secs(10);
    let d = state.synchronize(&cfg, &summary(1000 * MI, 2 << 30, stats), &refs2, t1);
    let (uid, ev) = d.evict.unwrap();
    assert_eq!(uid, "uid-burstable");
    assert!(
        ev.message.ends_with(
            "Container c was using 800Mi, request is 64Mi, has larger consumption of memory. "
        ),
        "{}",
        ev.message
    );

    // Recovered: no eviction, but MemoryPressure stays for the transition period.
    let refs3: Vec<&Pod> = objs[..1].iter().collect();
    let s = summary(3 << 30, MI, vec![pod_stats("guaranteed", 400 * MI)]);
    let t2 = t1 + Duration::from_secs(10);
    let d = state.synchronize(&cfg, &s, &refs3, t2);
    assert_eq!(d.conditions, [Condition::MemoryPressure]);
    assert!(d.evict.is_none());
    let d = state.synchronize(&cfg, &s, &refs3, t1 + Duration::from_secs(20));
    assert!(d.conditions.is_empty());
}

#[test]
fn soft_thresholds_wait_for_their_grace_period() {
    let mut f = flags("");
    f.soft = EvictionThreshold::parse_list("memory.available<1Gi").unwrap();
    f.soft_grace_period = parse_map("memory.available=30s").unwrap();
    let mut cfg = Config::new(thresholds(&f).unwrap());
    cfg.max_pod_grace_period = Duration::from_secs(20);
    let mut p = pod("p", "", "", 0);
    let refs = [&p];
    let mut state = State::default();
    let t0 = Instant::now();
    let low = || summary(500 * MI, 3 << 30, vec![pod_stats("p", 600 * MI)]);
    let d = state.synchronize(&cfg, &low(), &refs, t0);
    // The condition at once; the eviction only after the grace period.
    assert_eq!(d.conditions, [Condition::MemoryPressure]);
    assert!(d.evict.is_none());
    let d = state.synchronize(&cfg, &low(), &refs, t0 + Duration::from_secs(31));
    let (_, ev) = d.evict.unwrap();
    // Pod's default (none set): the max pod grace period.
    assert_eq!(ev.grace, Duration::from_secs(20));
    p.spec.as_mut().unwrap().termination_grace_period_seconds = Some(5);
    assert_eq!(
        grace_period(&cfg, &cfg.thresholds[0], &p),
        Duration::from_secs(5)
    );
}

#[test]
fn minimum_reclaim_keeps_a_threshold_met() {
    let mut f = flags("memory.available<1Gi");
    f.minimum_reclaim = parse_map("memory.available=500Mi").unwrap();
    let cfg = Config::new(thresholds(&f).unwrap());
    let p = pod("p", "", "", 0);
    let refs = [&p];
    let mut state = State::default();
    let t0 = Instant::now();
    let s = |avail| summary(avail, 3 << 30, vec![pod_stats("p", 600 * MI)]);
    assert!(
        state
            .synchronize(&cfg, &s(900 * MI), &refs, t0)
            .evict
            .is_some()
    );
    // 1.2Gi is above 1Gi but below 1Gi + 500Mi: still evicting.
    assert!(
        state
            .synchronize(&cfg, &s(1200 * MI), &refs, t0 + Duration::from_secs(1))
            .evict
            .is_some()
    );
    // 2Gi: resolved.
    assert!(
        state
            .synchronize(&cfg, &s(2 << 30), &refs, t0 + Duration::from_secs(2))
            .evict
            .is_none()
    );
}

#[test]
fn critical_pods_are_not_evicted() {
    let cfg = Config::new(thresholds(&flags("memory.available<1Gi")).unwrap());
    let critical = pod("critical", "", "", 2_000_001_000);
    let refs = [&critical];
    let s = summary(500 * MI, 3 << 30, vec![pod_stats("critical", 900 * MI)]);
    let d = State::default().synchronize(&cfg, &s, &refs, Instant::now());
    assert_eq!(d.conditions, [Condition::MemoryPressure]);
    assert!(d.evict.is_none());
}

#[test]
fn disk_and_pid_thresholds_raise_their_conditions() {
    let cfg = Config::new(thresholds(&flags("nodefs.inodesFree<95%,pid.available<4000")).unwrap());
    let p = pod("p", "", "", 0);
    let d = State::default().synchronize(
        &cfg,
        &summary(4 << 30, MI, vec![pod_stats("p", MI)]),
        &[&p],
        Instant::now(),
    );
    assert_eq!(
        d.conditions,
        [Condition::DiskPressure, Condition::PidPressure]
    );
    let (_, ev) = d.evict.unwrap();
    assert_eq!(
        ev.message,
        "The node was low on resource: inodes. Threshold quantity: 949, available: 900. "
    );
}

#[test]
fn admission_under_pressure() {
    let be = pod("be", "", "", 0);
    let bu = pod("bu", "10Mi", "", 0);
    let mut tolerant = pod("tolerant", "", "", 0);
    tolerant.spec.as_mut().unwrap().tolerations = Some(vec![serde_json::from_value(json!({
        "key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"
    }))
    .unwrap()]);
    let critical = pod("critical", "", "", 2_000_000_000);
    let mem = [Condition::MemoryPressure];
    let disk = [Condition::MemoryPressure, Condition::DiskPressure];
    let cases: &[(&[Condition], &Pod, Option<&str>)] = &[
        (&[], &be, None),
        (
            &mem,
            &be,
            Some("The node had condition: [MemoryPressure]. "),
        ),
        (&mem, &bu, None),
        (&mem, &tolerant, None),
        (&mem, &critical, None),
        (
            &disk,
            &bu,
            Some("The node had condition: [MemoryPressure DiskPressure]. "),
        ),
    ];
    for (conds, p, want) in cases {
        assert_eq!(admit(conds, p).as_deref(), *want, "{:?}", p.metadata.name);
    }
    assert_eq!(
        node_condition_message(&[Condition::PidPressure]),
        "The node had condition: [PIDPressure]. "
    );
    // Once per pod.
    let e = Evictions::default();
    e.set_conditions(&mem);
    assert!(e.admit_once(&be).is_some());
    assert!(e.admit_once(&be).is_none());
}

#[test]
fn evicted_status_is_failed_with_the_disruption_target() {
    let st = evicted_status(Default::default(), "m", k8s_openapi::jiff::Timestamp::now());
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(st.reason.as_deref(), Some("Evicted"));
    let c = &st.conditions.unwrap()[0];
    assert_eq!(
        (c.type_.as_str(), c.status.as_str(), c.reason.as_deref()),
        ("DisruptionTarget", "True", Some("TerminationByKubelet"))
    );
    // The message names only containers over their requests.
    let p = pod("g", "500Mi", "500Mi", 0);
    let stats = vec![pod_stats("g", 400 * MI)];
    let by = stats_by_uid(&stats);
    let cfg = thresholds(&flags("memory.available<1Gi")).unwrap();
    let obs = observations(&summary(100 * MI, MI, vec![]));
    assert_eq!(
        eviction_message(signals::Resource::Memory, &p, &by, &cfg, &[0], &obs),
        "The node was low on resource: memory. Threshold quantity: 1Gi, available: 100Mi. "
    );
}

#[test]
fn active_pods_leave_out_terminal_deleted_and_finished_ones() {
    let e = Evictions::default();
    let running = pod("running", "", "", 0);
    let mut failed = pod("failed", "", "", 0);
    failed.status.as_mut().unwrap().phase = Some("Failed".into());
    let mut deleting = pod("deleting", "", "", 0);
    deleting.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now()),
    );
    let evicted = pod("evicted", "", "", 0);
    for p in [&running, &failed, &deleting, &evicted] {
        e.observe(p);
    }
    e.finished("uid-evicted");
    let names: Vec<String> = e
        .active_pods()
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["running"]);
    // A requested eviction is taken once.
    let _rx = e.request(
        "uid-running",
        PodEviction {
            grace: Duration::ZERO,
            message: "m".into(),
        },
    );
    assert!(e.take("uid-running").is_some());
    assert!(e.take("uid-running").is_none());
}

/// Stats whose node filesystem has `available` of 100 GiB free; the reclaimer
/// frees `frees` bytes of it when asked for a disk signal.
struct DiskNode {
    available: std::sync::Mutex<u64>,
    frees: u64,
    asked: std::sync::Mutex<Vec<Signal>>,
}

#[async_trait::async_trait]
impl manager::SummaryProvider for DiskNode {
    async fn summary(&self) -> Option<Summary> {
        let mut s = summary(4 << 30, 1 << 30, vec![pod_stats("besteffort", MI)]);
        if let Some(fs) = s.node.fs.as_mut() {
            fs.available_bytes = Some(*self.available.lock().unwrap());
        }
        Some(s)
    }
}

#[async_trait::async_trait]
impl manager::NodeReclaimer for DiskNode {
    async fn reclaim(&self, signal: Signal) -> bool {
        self.asked.lock().unwrap().push(signal);
        if signal == Signal::MemoryAvailable {
            return false;
        }
        *self.available.lock().unwrap() += self.frees;
        true
    }
}

#[tokio::test]
async fn disk_pressure_is_met_by_node_level_reclaim_before_any_pod_goes() {
    let cfg = Config::new(thresholds(&flags("nodefs.available<10Gi")).unwrap());
    let objs = [pod("besteffort", "", "", 0)];
    let refs: Vec<&Pod> = objs.iter().collect();
    // (bytes free before, bytes the reclaim frees, a pod still evicted)
    let rows = [(5u64 << 30, 6u64 << 30, false), (5 << 30, 1 << 30, true)];
    for (available, frees, evicts) in rows {
        let node = DiskNode {
            available: std::sync::Mutex::new(available),
            frees,
            asked: Default::default(),
        };
        let s = manager::SummaryProvider::summary(&node).await.unwrap();
        let d = State::default().synchronize(&cfg, &s, &refs, Instant::now());
        assert_eq!(d.reclaim, Some(Signal::NodeFsAvailable));
        assert!(d.evict.is_some());
        let relieved =
            manager::reclaim_node_level_resources(&cfg, Signal::NodeFsAvailable, &node, &node)
                .await;
        assert_eq!(relieved, !evicts, "available {available} frees {frees}");
        assert_eq!(*node.asked.lock().unwrap(), [Signal::NodeFsAvailable]);
    }
    // Nothing to reclaim for memory: the pod goes.
    let node = DiskNode {
        available: std::sync::Mutex::new(50 << 30),
        frees: 0,
        asked: Default::default(),
    };
    assert!(
        !manager::reclaim_node_level_resources(&cfg, Signal::MemoryAvailable, &node, &node).await
    );
    assert!(
        !manager::reclaim_node_level_resources(
            &cfg,
            Signal::NodeFsAvailable,
            &node,
            &manager::NoReclaim
        )
        .await
    );
}
