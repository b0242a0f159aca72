use std::collections::{BTreeMap, HashSet};

use chrono::TimeZone;

use super::*;
use crate::runtime::fake::FakeRuntime;
use crate::runtime::{ContainerConfig, SandboxConfig};

/// Pods by uid: live, gone (or evicted: content removable), or terminal.
struct Pods {
    gone: HashSet<&'static str>,
    terminal: HashSet<&'static str>,
}

impl PodStateProvider for Pods {
    fn should_pod_content_be_removed(&self, uid: &str) -> bool {
        self.gone.contains(uid)
    }
    fn should_pod_runtime_be_removed(&self, uid: &str) -> bool {
        self.gone.contains(uid) || self.terminal.contains(uid)
    }
}

fn pods(gone: &[&'static str], terminal: &[&'static str]) -> Pods {
    Pods {
        gone: gone.iter().copied().collect(),
        terminal: terminal.iter().copied().collect(),
    }
}

fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_700_000_000 + secs, 0).unwrap()
}

/// A container `pod/name#attempt` created at `secs`, dead unless `running`.
fn c(pod: &str, name: &str, attempt: u32, secs: i64, running: bool) -> ContainerStatus {
    let labels = BTreeMap::from([
        (LABEL_POD_UID.to_string(), pod.to_string()),
        (LABEL_CONTAINER_NAME.to_string(), name.to_string()),
    ]);
    ContainerStatus {
        id: format!("{pod}/{name}#{attempt}"),
        sandbox_id: format!("{pod}-sb"),
        name: name.into(),
        attempt,
        state: if running {
            ContainerState::Running
        } else {
            ContainerState::Exited
        },
        created_at: Some(at(secs)),
        labels,
        ..Default::default()
    }
}

fn sb(pod: &str, n: u32, ready: bool) -> SandboxStatus {
    SandboxStatus {
        id: format!("{pod}-sb{n}"),
        name: pod.into(),
        namespace: "default".into(),
        uid: pod.into(),
        attempt: n,
        state: if ready {
            SandboxState::Ready
        } else {
            SandboxState::NotReady
        },
        created_at: Some(at(i64::from(n))),
        ips: vec![],
        labels: BTreeMap::new(),
    }
}

fn policy(min_age_secs: u64, per_container: i32, max: i32) -> ContainerGcPolicy {
    ContainerGcPolicy {
        min_age: Duration::from_secs(min_age_secs),
        max_per_pod_container: per_container,
        max_containers: max,
    }
}

#[test]
fn dead_containers_are_collected_as_upstream() {
    let crash_loop = vec![
        c("a", "app", 0, 10, false),
        c("a", "app", 1, 20, false),
        c("a", "app", 2, 30, false),
        c("a", "app", 3, 40, true),
        c("a", "side", 0, 15, false),
    ];
    let two_pods = vec![
        c("a", "app", 0, 10, false),
        c("a", "app", 1, 20, false),
        c("b", "app", 0, 11, false),
        c("b", "app", 1, 21, false),
        c("b", "app", 2, 31, false),
    ];
    // (what, containers, policy, gone pods, terminal pods, sources ready,
    //  evict non-deleted, removed ids)
    type Row<'a> = (
        &'a str,
        &'a [ContainerStatus],
        ContainerGcPolicy,
        &'a [&'static str],
        &'a [&'static str],
        bool,
        bool,
        &'a [&'a str],
    );
    let rows: &[Row] = &[
        (
            "the default keeps the newest dead instance per container",
            &crash_loop,
            ContainerGcPolicy::default(),
            &[],
            &[],
            true,
            false,
            &["a/app#1", "a/app#0"],
        ),
        (
            "a negative per-container limit keeps them all",
            &crash_loop,
            policy(0, -1, -1),
            &[],
            &[],
            true,
            false,
            &[],
        ),
        (
            "zero per container removes every dead one, never the running one",
            &crash_loop,
            policy(0, 0, -1),
            &[],
            &[],
            true,
            false,
            &["a/app#2", "a/app#1", "a/app#0", "a/side#0"],
        ),
        (
            "younger than the minimum age stays (created at 30 s and 40 s, now 60 s)",
            &crash_loop,
            policy(35, 0, -1),
            &[],
            &[],
            true,
            false,
            &["a/app#1", "a/app#0", "a/side#0"],
        ),
        (
            "a gone pod loses all its dead containers",
            &two_pods,
            ContainerGcPolicy::default(),
            &["b"],
            &[],
            true,
            false,
            &["b/app#2", "b/app#1", "b/app#0", "a/app#0"],
        ),
        (
            "before the pods are listed no pod counts as gone",
            &two_pods,
            ContainerGcPolicy::default(),
            &["b"],
            &[],
            false,
            false,
            &["a/app#0", "b/app#1", "b/app#0"],
        ),
        (
            "a terminal pod keeps its containers until disk is reclaimed",
            &two_pods,
            policy(0, -1, -1),
            &[],
            &["a"],
            true,
            false,
            &[],
        ),
        (
            "reclaiming disk removes a terminal pod's containers",
            &two_pods,
            policy(0, -1, -1),
            &[],
            &["a"],
            true,
            true,
            &["a/app#1", "a/app#0"],
        ),
        (
            "a node-wide limit of 3: one per unit, then the oldest overall",
            &two_pods,
            policy(0, -1, 3),
            &[],
            &[],
            true,
            false,
            &["a/app#0", "b/app#1", "b/app#0"],
        ),
        (
            "a node-wide limit of 1 below the unit count: the oldest unit's goes",
            &two_pods,
            policy(0, -1, 1),
            &[],
            &[],
            true,
            false,
            &["a/app#0", "b/app#1", "b/app#0", "a/app#1"],
        ),
    ];
    for (what, containers, policy, gone, terminal, ready, evict, want) in rows {
        let p = plan(
            policy,
            containers,
            &[],
            &pods(gone, terminal),
            *ready,
            *evict,
            at(60),
        );
        assert_eq!(p.containers, *want, "{what}");
    }
}

#[test]
fn dead_sandboxes_without_containers_go_keeping_a_live_pods_newest() {
    // Pod a: two dead sandboxes and a ready one; pod b (gone): two dead ones,
    // one still holding a dead container that the plan keeps (no limit).
    let sandboxes = [
        sb("a", 0, false),
        sb("a", 1, false),
        sb("a", 2, true),
        sb("b", 0, false),
        sb("b", 1, false),
    ];
    let mut held = c("b", "app", 0, 5, false);
    held.sandbox_id = "b-sb1".into();
    let p = plan(
        &policy(0, -1, -1),
        std::slice::from_ref(&held),
        &sandboxes,
        &pods(&[], &[]),
        true,
        false,
        at(60),
    );
    // a keeps sb2 (newest, ready); b is live here: sb1 is its newest.
    assert_eq!(p.sandboxes, ["a-sb1", "a-sb0", "b-sb0"]);
    // b gone: its container goes, and with it the hold on sb1.
    let p = plan(
        &policy(0, -1, -1),
        std::slice::from_ref(&held),
        &sandboxes,
        &pods(&["b"], &[]),
        true,
        false,
        at(60),
    );
    assert_eq!(p.containers, ["b/app#0"]);
    assert_eq!(p.sandboxes, ["a-sb1", "a-sb0", "b-sb1", "b-sb0"]);
    // A pod's only sandbox, dead, stays while the pod lives.
    let p = plan(
        &ContainerGcPolicy::default(),
        &[],
        &[sb("c", 0, false)],
        &pods(&[], &[]),
        true,
        false,
        at(60),
    );
    assert!(p.sandboxes.is_empty());
}

#[tokio::test]
async fn garbage_collect_removes_through_the_runtime() {
    let rt = FakeRuntime::new();
    rt.add_image("img");
    let labels = BTreeMap::from([(LABEL_POD_UID.to_string(), "p".to_string())]);
    let cfg = SandboxConfig {
        uid: "p".into(),
        labels: labels.clone(),
        ..Default::default()
    };
    let old = rt.run_sandbox(&cfg).await.unwrap();
    rt.stop_sandbox(&old).await.unwrap();
    let live = rt.run_sandbox(&cfg).await.unwrap();
    rt.set_created_at(&old, at(0));
    rt.set_created_at(&live, at(1));
    let mut ids = Vec::new();
    for attempt in 0..3 {
        let mut labels = labels.clone();
        labels.insert(LABEL_CONTAINER_NAME.into(), "app".into());
        let cc = ContainerConfig {
            name: "app".into(),
            attempt,
            image: "img".into(),
            labels,
            ..Default::default()
        };
        let id = rt.create_container(&live, &cc, &cfg).await.unwrap();
        rt.set_created_at(&id, at(i64::from(attempt)));
        rt.start_container(&id).await.unwrap();
        if attempt < 2 {
            rt.exit_container(&id, 1, "Error");
        }
        ids.push(id);
    }
    let p = garbage_collect(
        &rt,
        &ContainerGcPolicy::default(),
        &pods(&[], &[]),
        true,
        false,
    )
    .await
    .unwrap();
    assert_eq!(p.containers, [ids[0].clone()]);
    assert_eq!(p.sandboxes, std::slice::from_ref(&old));
    let left: Vec<String> = rt
        .list_containers(&Filter::default())
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert_eq!(left, [ids[1].clone(), ids[2].clone()]);
    assert_eq!(rt.sandbox_count(), 1);
}
