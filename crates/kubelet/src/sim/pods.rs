//! The simulated pod lifecycle: one watch on all pods, filtered by the simulator's
//! node names (a field-selector watch per node would be thousands of watches).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use berth_topology::numa_fit;
use berth_topology::provider::{TOPOLOGY_AFFINITY_ERROR, TOPOLOGY_AFFINITY_MESSAGE};
use chrono::{SecondsFormat, Utc};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Container, Node, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tracing::{debug, warn};

use super::{EXIT_CODE_ANNOTATION, FAIL_ANNOTATION, RUN_SECONDS_ANNOTATION, SimConfig};
use crate::Result;

/// Pod API writes in flight at once, so a burst of pods cannot flood the server.
const MAX_IN_FLIGHT: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Starting,
    Settled,
    Deleting,
}

struct Tracked {
    node: String,
    ip: Option<u8>,
    stage: Stage,
}

pub(super) struct PodDriver {
    client: Client,
    cfg: SimConfig,
    names: Arc<HashSet<String>>,
    /// node → (pod /24 prefix, node IP).
    subnets: HashMap<String, (String, String)>,
    used_ips: HashMap<String, BTreeSet<u8>>,
    pods: HashMap<String, Tracked>,
    permits: Arc<Semaphore>,
    /// The nodes' NUMA cells under `single-numa-node`, if simulated.
    topology: Option<super::topology::SimTopology>,
}

impl PodDriver {
    pub(super) fn new(
        client: Client,
        cfg: SimConfig,
        names: Arc<HashSet<String>>,
        subnets: HashMap<String, (String, String)>,
    ) -> Self {
        let topology = super::topology::SimTopology::new(&cfg, &names);
        PodDriver {
            client,
            names,
            subnets,
            used_ips: HashMap::new(),
            pods: HashMap::new(),
            permits: Arc::new(Semaphore::new(MAX_IN_FLIGHT)),
            topology,
            cfg,
        }
    }

    pub(super) async fn run(mut self) -> Result<()> {
        let api: Api<Pod> = Api::all(self.client.clone());
        // Only bound pods concern a node: unbound ones (a burst of creates) never
        // reach this process, nor cost it a decode.
        let bound = berth_runtime::reflect::informer_config().fields("spec.nodeName!=");
        let mut events = watcher::watcher(api, bound).default_backoff().boxed();
        let mut seen: HashSet<String> = HashSet::new();
        // Published NUMA state goes out in batches, one patch per changed node.
        let mut publish = tokio::time::interval(Duration::from_millis(500));
        loop {
            let next = tokio::select! {
                e = events.try_next() => e,
                _ = publish.tick() => {
                    self.publish_topology();
                    continue;
                }
            };
            match next {
                Ok(Some(Event::Apply(p))) => self.on_pod(p),
                Ok(Some(Event::InitApply(p))) => {
                    if let Some(uid) = p.metadata.uid.clone() {
                        seen.insert(uid);
                    }
                    self.on_pod(p)
                }
                Ok(Some(Event::Delete(p))) => {
                    if let Some(uid) = p.metadata.uid.as_deref() {
                        self.forget(uid);
                    }
                }
                Ok(Some(Event::Init)) => seen.clear(),
                // A relist: pods deleted while the watch was down get no Delete event.
                Ok(Some(Event::InitDone)) => {
                    let gone: Vec<String> = self
                        .pods
                        .keys()
                        .filter(|u| !seen.contains(*u))
                        .cloned()
                        .collect();
                    for uid in gone {
                        self.forget(&uid);
                    }
                }
                Ok(None) => return Ok(()),
                Err(e) => warn!(error = %e, "pod watch failed; retrying"),
            }
        }
    }

    fn publish_topology(&mut self) {
        let Some(t) = self.topology.as_mut() else {
            return;
        };
        for (node, state) in t.take_dirty() {
            let api: Api<Node> = Api::all(self.client.clone());
            let permits = self.permits.clone();
            tokio::spawn(async move {
                let _permit = permits.acquire().await;
                let patch = json!({"metadata": {"annotations": {numa_fit::ANNOTATION: state}}});
                if let Err(e) = api
                    .patch(&node, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    warn!(%node, error = %e, "publishing the NUMA cells");
                }
            });
        }
    }

    /// The simulated Topology Manager's refusal: Failed, as the agent's.
    fn spawn_reject(&self, pod: &Pod) {
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let name = pod.metadata.name.clone().unwrap_or_default();
        let permits = self.permits.clone();
        let status = json!({
            "phase": "Failed",
            "reason": TOPOLOGY_AFFINITY_ERROR,
            "message": format!("Pod was rejected: {TOPOLOGY_AFFINITY_MESSAGE}"),
        });
        tokio::spawn(async move {
            let _ = patch_status(&api, &name, &permits, status).await;
        });
    }

    fn forget(&mut self, uid: &str) {
        if let Some(t) = self.topology.as_mut() {
            t.release(uid);
        }
        if let Some(t) = self.pods.remove(uid)
            && let Some(ip) = t.ip
            && let Some(set) = self.used_ips.get_mut(&t.node)
        {
            set.remove(&ip);
        }
    }

    fn allocate_ip(&mut self, node: &str) -> Option<u8> {
        let used = self.used_ips.entry(node.to_string()).or_default();
        // .1 is the bridge's gateway in a real /24.
        let ip = (2..=254u8).find(|i| !used.contains(i))?;
        used.insert(ip);
        Some(ip)
    }

    fn on_pod(&mut self, pod: Pod) {
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
            return;
        };
        if !self.names.contains(&node) {
            return;
        }
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        if !self.pods.contains_key(&uid) {
            // A pod already started (by an earlier simulator run) keeps its IP.
            let existing = pod
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.as_deref())
                .and_then(|ip| ip.rsplit('.').next())
                .and_then(|o| o.parse::<u8>().ok());
            let mut ip = match existing {
                Some(o) => {
                    self.used_ips.entry(node.clone()).or_default().insert(o);
                    Some(o)
                }
                None if phase == "Succeeded" || phase == "Failed" => None,
                None => self.allocate_ip(&node),
            };
            let mut stage = if phase == "Pending" || phase.is_empty() {
                Stage::Starting
            } else {
                Stage::Settled
            };
            let finished = phase == "Succeeded" || phase == "Failed";
            if !finished
                && let Some(t) = self.topology.as_mut()
                && !t.admit(&node, &pod)
                && stage == Stage::Starting
            {
                self.spawn_reject(&pod);
                stage = Stage::Settled;
                if let Some(o) = ip.take()
                    && let Some(set) = self.used_ips.get_mut(&node)
                {
                    set.remove(&o);
                }
            }
            self.pods.insert(
                uid.clone(),
                Tracked {
                    node: node.clone(),
                    ip,
                    stage,
                },
            );
            if stage == Stage::Starting {
                self.spawn_start(&pod, &node, ip);
            }
        }
        if (phase == "Succeeded" || phase == "Failed")
            && let Some(t) = self.topology.as_mut()
        {
            t.release(&uid);
        }
        if pod.metadata.deletion_timestamp.is_some()
            && let Some(t) = self.pods.get_mut(&uid)
            && t.stage != Stage::Deleting
        {
            t.stage = Stage::Deleting;
            self.spawn_delete(&pod, uid);
        }
    }

    fn spawn_start(&self, pod: &Pod, node: &str, ip: Option<u8>) {
        let (subnet, host_ip) = self.subnets.get(node).cloned().unwrap_or_default();
        let pod_ip = ip.map(|o| format!("{subnet}.{o}"));
        let code = exit_code(pod);
        let fail = code != 0;
        let run_for = run_for(pod);
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let name = pod.metadata.name.clone().unwrap_or_default();
        let pod = pod.clone();
        let delay = self.cfg.start_delay;
        let permits = self.permits.clone();
        tokio::spawn(async move {
            let started = now();
            let creating = creating_status(&pod, &host_ip, &started);
            if patch_status(&api, &name, &permits, creating).await.is_err() {
                return;
            }
            tokio::time::sleep(delay).await;
            let next = if fail && run_for.is_none() {
                terminated_status(&pod, &host_ip, pod_ip.as_deref(), &started, code)
            } else {
                running_status(&pod, &host_ip, pod_ip.as_deref(), &started)
            };
            if patch_status(&api, &name, &permits, next).await.is_err() {
                return;
            }
            if let Some(d) = run_for {
                tokio::time::sleep(d).await;
                let done = terminated_status(&pod, &host_ip, pod_ip.as_deref(), &started, code);
                let _ = patch_status(&api, &name, &permits, done).await;
            }
        });
    }

    fn spawn_delete(&self, pod: &Pod, uid: String) {
        let grace = pod
            .metadata
            .deletion_grace_period_seconds
            .unwrap_or(0)
            .max(0) as u64;
        let wait = Duration::from_secs(grace).min(self.cfg.max_termination);
        let api: Api<Pod> = Api::namespaced(
            self.client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let name = pod.metadata.name.clone().unwrap_or_default();
        let permits = self.permits.clone();
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            let Ok(_permit) = permits.acquire().await else {
                return;
            };
            // The API server keeps a graceful pod until its node confirms with grace 0.
            let dp = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match api.delete(&name, &dp).await {
                Ok(_) => debug!(pod = %name, "simulated pod deleted"),
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(e) => warn!(pod = %name, error = %e, "deleting simulated pod"),
            }
        });
    }
}

/// The simulated containers' exit code: `sim.berth.dev/exit-code` when set,
/// else 1 with `sim.berth.dev/fail: "true"`, else 0.
fn exit_code(pod: &Pod) -> i32 {
    let ann = pod.metadata.annotations.as_ref();
    if let Some(c) = ann
        .and_then(|a| a.get(EXIT_CODE_ANNOTATION))
        .and_then(|v| v.trim().parse().ok())
    {
        return c;
    }
    let fail = ann
        .and_then(|a| a.get(FAIL_ANNOTATION))
        .is_some_and(|v| v == "true");
    i32::from(fail)
}

/// How long the pod runs before its containers exit (`sim.berth.dev/run-seconds`);
/// `None` when unset, unparsable, or under `restartPolicy: Always` (a kubelet
/// would restart the containers, so the pod never finishes).
fn run_for(pod: &Pod) -> Option<Duration> {
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always");
    if policy == "Always" {
        return None;
    }
    let secs: f64 = pod
        .metadata
        .annotations
        .as_ref()?
        .get(RUN_SECONDS_ANNOTATION)?
        .trim()
        .parse()
        .ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

async fn patch_status(
    api: &Api<Pod>,
    name: &str,
    permits: &Semaphore,
    status: Value,
) -> Result<()> {
    let Ok(_permit) = permits.acquire().await else {
        return Ok(());
    };
    let patch = json!({ "status": status });
    match api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) => {
            // 404: deleted meanwhile; nothing to do.
            if !matches!(&e, kube::Error::Api(r) if r.code == 404) {
                warn!(pod = %name, error = %e, "simulated pod status update failed");
            }
            Err(e.into())
        }
    }
}

fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn condition(
    type_: &str,
    ok: bool,
    reason: Option<&str>,
    message: Option<String>,
    at: &str,
) -> Value {
    let mut c = json!({
        "type": type_,
        "status": if ok { "True" } else { "False" },
        "lastProbeTime": null,
        "lastTransitionTime": at,
    });
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    if let Some(m) = message {
        c["message"] = json!(m);
    }
    c
}

fn containers(pod: &Pod) -> (&[Container], &[Container]) {
    let spec = pod.spec.as_ref();
    (
        spec.map(|s| s.containers.as_slice()).unwrap_or_default(),
        spec.and_then(|s| s.init_containers.as_deref())
            .unwrap_or_default(),
    )
}

/// When the scheduler set PodScheduled; kept so the kubelet never moves it.
fn scheduled_at(pod: &Pod, fallback: &str) -> Value {
    let at = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
        .and_then(|c| serde_json::to_value(&c.last_transition_time).ok())
        .filter(|v| !v.is_null());
    at.unwrap_or_else(|| json!(fallback))
}

fn host(host_ip: &str) -> Value {
    json!({ "hostIP": host_ip, "hostIPs": [{ "ip": host_ip }] })
}

fn names(cs: &[Container]) -> String {
    cs.iter()
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

fn creating_status(pod: &Pod, host_ip: &str, at: &str) -> Value {
    let (cs, inits) = containers(pod);
    let unready = Some(format!("containers with unready status: [{}]", names(cs)));
    let mut scheduled = condition("PodScheduled", true, None, None, at);
    scheduled["lastTransitionTime"] = scheduled_at(pod, at);
    let initialized = if inits.is_empty() {
        condition("Initialized", true, None, None, at)
    } else {
        condition(
            "Initialized",
            false,
            Some("ContainersNotInitialized"),
            Some(format!(
                "containers with incomplete status: [{}]",
                names(inits)
            )),
            at,
        )
    };
    let waiting = |c: &Container| {
        json!({
            "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": "",
            "ready": false, "restartCount": 0, "started": false,
            "state": { "waiting": { "reason": if inits.is_empty() { "ContainerCreating" } else { "PodInitializing" } } },
        })
    };
    let mut st = host(host_ip);
    st["phase"] = json!("Pending");
    st["startTime"] = json!(at);
    st["conditions"] = json!([
        condition("PodReadyToStartContainers", false, None, None, at),
        initialized,
        condition(
            "Ready",
            false,
            Some("ContainersNotReady"),
            unready.clone(),
            at
        ),
        condition(
            "ContainersReady",
            false,
            Some("ContainersNotReady"),
            unready,
            at
        ),
        scheduled,
    ]);
    st["containerStatuses"] = cs.iter().map(waiting).collect();
    if !inits.is_empty() {
        st["initContainerStatuses"] = inits
            .iter()
            .map(|c| {
                let mut s = waiting(c);
                s["state"] = json!({ "waiting": { "reason": "PodInitializing" } });
                s
            })
            .collect();
    }
    st
}

fn container_id(pod: &Pod, c: &Container) -> String {
    let uid = pod
        .metadata
        .uid
        .as_deref()
        .unwrap_or_default()
        .replace('-', "");
    format!("sim://{uid}-{}", c.name)
}

fn image_id(c: &Container) -> String {
    c.image.clone().unwrap_or_default()
}

fn init_done(pod: &Pod, started: &str, now: &str) -> Value {
    let (_, inits) = containers(pod);
    inits
        .iter()
        .map(|c| {
            json!({
                "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": image_id(c),
                "containerID": container_id(pod, c), "ready": true, "restartCount": 0, "started": false,
                "state": { "terminated": { "exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": now, "containerID": container_id(pod, c) } },
            })
        })
        .collect()
}

fn running_status(pod: &Pod, host_ip: &str, pod_ip: Option<&str>, started: &str) -> Value {
    let (cs, inits) = containers(pod);
    let at = now();
    let mut scheduled = condition("PodScheduled", true, None, None, &at);
    scheduled["lastTransitionTime"] = scheduled_at(pod, started);
    let mut st = host(host_ip);
    st["phase"] = json!("Running");
    st["startTime"] = json!(started);
    if let Some(ip) = pod_ip {
        st["podIP"] = json!(ip);
        st["podIPs"] = json!([{ "ip": ip }]);
    }
    st["conditions"] = json!([
        condition("PodReadyToStartContainers", true, None, None, &at),
        condition("Initialized", true, None, None, &at),
        condition("Ready", true, None, None, &at),
        condition("ContainersReady", true, None, None, &at),
        scheduled,
    ]);
    st["containerStatuses"] = cs
        .iter()
        .map(|c| {
            json!({
                "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": image_id(c),
                "containerID": container_id(pod, c), "ready": true, "restartCount": 0, "started": true,
                "state": { "running": { "startedAt": at } },
            })
        })
        .collect();
    if !inits.is_empty() {
        st["initContainerStatuses"] = init_done(pod, started, &at);
    }
    st
}

/// Every container exited with `exit_code`: the pod is Succeeded (0) or Failed.
fn terminated_status(
    pod: &Pod,
    host_ip: &str,
    pod_ip: Option<&str>,
    started: &str,
    exit_code: i32,
) -> Value {
    let (cs, inits) = containers(pod);
    let at = now();
    let (phase, pod_reason, reason) = if exit_code == 0 {
        ("Succeeded", "PodCompleted", "Completed")
    } else {
        ("Failed", "PodFailed", "Error")
    };
    let mut scheduled = condition("PodScheduled", true, None, None, &at);
    scheduled["lastTransitionTime"] = scheduled_at(pod, started);
    let mut st = host(host_ip);
    st["phase"] = json!(phase);
    st["startTime"] = json!(started);
    if let Some(ip) = pod_ip {
        st["podIP"] = json!(ip);
        st["podIPs"] = json!([{ "ip": ip }]);
    }
    st["conditions"] = json!([
        condition("PodReadyToStartContainers", false, None, None, &at),
        condition("Initialized", true, None, None, &at),
        condition("Ready", false, Some(pod_reason), None, &at),
        condition("ContainersReady", false, Some(pod_reason), None, &at),
        scheduled,
    ]);
    st["containerStatuses"] = cs
        .iter()
        .map(|c| {
            json!({
                "name": c.name, "image": c.image.clone().unwrap_or_default(), "imageID": image_id(c),
                "containerID": container_id(pod, c), "ready": false, "restartCount": 0, "started": false,
                "state": { "terminated": { "exitCode": exit_code, "reason": reason, "startedAt": started, "finishedAt": at, "containerID": container_id(pod, c) } },
            })
        })
        .collect();
    if !inits.is_empty() {
        st["initContainerStatuses"] = init_done(pod, started, &at);
    }
    st
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(policy: Option<&str>, run: Option<&str>) -> Pod {
        let mut p = Pod {
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                restart_policy: policy.map(String::from),
                ..Default::default()
            }),
            ..Default::default()
        };
        if let Some(r) = run {
            p.metadata.annotations =
                Some([(RUN_SECONDS_ANNOTATION.to_string(), r.to_string())].into());
        }
        p
    }

    #[test]
    fn run_seconds_only_for_pods_that_may_finish() {
        let cases = [
            (Some("Never"), Some("2"), Some(Duration::from_secs(2))),
            (
                Some("OnFailure"),
                Some("0.5"),
                Some(Duration::from_millis(500)),
            ),
            (Some("Always"), Some("2"), None),
            (None, Some("2"), None),
            (Some("Never"), None, None),
            (Some("Never"), Some("soon"), None),
            (Some("Never"), Some("-1"), None),
        ];
        for (policy, run, want) in cases {
            assert_eq!(run_for(&pod(policy, run)), want, "{policy:?} {run:?}");
        }
    }

    #[test]
    fn exit_codes() {
        let with = |kv: &[(&str, &str)]| Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                annotations: Some(
                    kv.iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        };
        let cases: &[(&[(&str, &str)], i32)] = &[
            (&[], 0),
            (&[(FAIL_ANNOTATION, "true")], 1),
            (&[(FAIL_ANNOTATION, "no")], 0),
            (&[(EXIT_CODE_ANNOTATION, "42")], 42),
            (&[(FAIL_ANNOTATION, "true"), (EXIT_CODE_ANNOTATION, "3")], 3),
            (&[(EXIT_CODE_ANNOTATION, "x")], 0),
        ];
        for (kv, want) in cases {
            assert_eq!(exit_code(&with(kv)), *want, "{kv:?}");
        }
    }

    #[test]
    fn terminated_status_phase_follows_exit_code() {
        let mut p = pod(Some("Never"), None);
        if let Some(s) = p.spec.as_mut() {
            s.containers = vec![Container {
                name: "c".into(),
                ..Default::default()
            }];
        }
        let ok = terminated_status(&p, "10.0.0.1", None, "t", 0);
        assert_eq!(ok["phase"], "Succeeded");
        assert_eq!(
            ok["containerStatuses"][0]["state"]["terminated"]["reason"],
            "Completed"
        );
        let bad = terminated_status(&p, "10.0.0.1", None, "t", 1);
        assert_eq!(bad["phase"], "Failed");
        assert_eq!(
            bad["containerStatuses"][0]["state"]["terminated"]["exitCode"],
            1
        );
    }
}
