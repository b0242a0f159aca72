//! One task per pod: drives the runtime towards the pod's spec (sandbox, init
//! containers in order, containers, restarts with back-off), reports status
//! through `pods/<name>/status`, and on deletion stops everything gracefully
//! and confirms with a grace-0 delete (the API server waits for that).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_runtime::events::{EventType, Recorder};
use chrono::Utc;
use k8s_openapi::api::core::v1::{ConfigMap, Container, ObjectReference, Pod, Secret};
use tokio::sync::watch;
use tracing::{info, warn};

mod evict;
mod security;

use super::actions::{Action, compute_pod_actions};
use super::podspec::{self, LABEL_CONTAINER_NAME, LABEL_POD_UID, NodeContext};
use super::status::{self, ContainerView};
use super::volumemanager::{PodVolumes, VolumeContext};
use crate::backoff::{self, Backoff};
use crate::envvars;
use crate::images::puller::Puller;
use crate::objects::ObjectSource;
use crate::prober::manager::{PodStatusProvider, ProbeManager};
use crate::runtime::{
    ContainerState, ContainerStatus, Filter, Runtime, RuntimeError, SandboxConfig, SandboxState,
};

/// What every worker shares.
pub struct Shared {
    /// ConfigMaps, Secrets, claims and volumes the pods reference.
    pub objects: Arc<dyn ObjectSource>,
    pub runtime: Arc<dyn Runtime>,
    pub ctx: NodeContext,
    pub node_name: String,
    pub host_ip: String,
    pub recorder: Recorder,
    pub backoff: Mutex<Backoff>,
    /// How often a pod is re-synced without changes (container exits, back-off
    /// expiry): upstream's PLEG relists every second.
    pub resync: Duration,
    /// Longest a deleted pod's containers get (caps terminationGracePeriodSeconds).
    pub max_grace: Duration,
    /// Startup/liveness/readiness probes of every pod.
    pub probes: ProbeManager,
    /// The last status each worker computed (what the prober reads).
    pub statuses: Arc<crate::status::manager::StatusManager>,
    /// Wakes a pod's worker (a probe result changed, a container was killed).
    pub pokes: Mutex<HashMap<String, Arc<tokio::sync::Notify>>>,
    /// Every Service (service link environment variables).
    pub services: kube::runtime::reflector::Store<k8s_openapi::api::core::v1::Service>,
    /// The node's allocatable (resourceFieldRef of containers without limits).
    pub allocatable: crate::node::Resources,
    /// ServiceAccount tokens of projected volumes (upstream's token manager).
    pub tokens: Arc<crate::token::TokenManager>,
    /// The root, QoS and pod cgroups.
    pub cgroups: Arc<crate::cgroups::NodeCgroups>,
    /// Evictions the eviction manager asks for, and its admission conditions.
    pub evictions: Arc<crate::eviction::Evictions>,
    /// The sysctl and AppArmor admission (`--allowed-unsafe-sysctls`, the
    /// host's AppArmor).
    pub admission: super::security::Admission,
    /// The Device Manager (device plugins' extended resources).
    pub devices: Arc<crate::cm::devicemanager::DeviceManager>,
    /// Exclusive CPUs and the shared pool (`--cpu-manager-policy`).
    pub cpus: Arc<crate::cm::cpumanager::CpuManager>,
    /// NUMA alignment at admission (`--topology-manager-policy`).
    pub topology: Arc<crate::cm::topologymanager::Manager>,
}

impl Shared {
    /// Wakes the worker of `uid` for an immediate sync.
    pub fn poke(&self, uid: &str) {
        if let Some(n) = self
            .pokes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(uid)
        {
            n.notify_one();
        }
    }

    fn backoff(&self) -> std::sync::MutexGuard<'_, Backoff> {
        self.backoff.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The per-pod worker's memory between syncs.
struct Worker {
    shared: Arc<Shared>,
    uid: String,
    sandbox: Option<(String, SandboxConfig)>,
    ips: Vec<String>,
    waiting: HashMap<String, (String, String)>,
    terminal: bool,
    /// The admit handlers passed once: upstream admits a pod when it is
    /// added (again after an agent restart), not at every sync, so a running
    /// pod is never rejected because the node changed around it.
    admitted: bool,
    sandbox_error: Option<String>,
    /// The pod's volumes as the volume manager has set them up.
    volumes: PodVolumes,
    /// This sync started a container: the runtime's view must be re-read.
    acted: bool,
    /// When the worker must look again even if nothing changes (the pod's
    /// activeDeadlineSeconds).
    wake_at: Option<Instant>,
}

fn container_ref(pod: &Pod, c: &str, init: bool) -> ObjectReference {
    let (name, ns, uid) = podspec::meta(pod);
    let list = if init { "initContainers" } else { "containers" };
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(name.into()),
        namespace: Some(ns.into()),
        uid: Some(uid.into()),
        resource_version: pod.metadata.resource_version.clone(),
        field_path: Some(format!("spec.{list}{{{c}}}")),
    }
}

/// The pod itself, for pod-level events.
fn pod_ref(pod: &Pod) -> ObjectReference {
    ObjectReference {
        field_path: None,
        ..container_ref(pod, "", false)
    }
}

/// Upstream's activeDeadlineHandler reason and message.
const DEADLINE_REASON: &str = "DeadlineExceeded";
const DEADLINE_MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

/// How long the pod may still run under `activeDeadlineSeconds`, counted from
/// its `status.startTime` (this worker's, else the API's): None without a
/// deadline or before the pod has started, zero once it has passed.
fn active_deadline_left(
    pod: &Pod,
    status: Option<&k8s_openapi::api::core::v1::PodStatus>,
    now: chrono::DateTime<Utc>,
) -> Option<Duration> {
    let secs = pod.spec.as_ref()?.active_deadline_seconds?;
    let start = status
        .and_then(|s| s.start_time.as_ref())
        .or_else(|| pod.status.as_ref()?.start_time.as_ref())?;
    let elapsed = (now.timestamp_millis() - start.0.as_millisecond()).max(0) as u64;
    let allowed = (secs.max(0) as u64).saturating_mul(1000);
    Some(Duration::from_millis(allowed.saturating_sub(elapsed)))
}

/// How long a just-killed container's status is given to learn it was an OOM kill.
const OOM_REASON_WAIT: Duration = Duration::from_millis(300);

/// containerd handles a task's OOM event and its exit event apart, and under
/// load the exit can come first: the status then says "Error" for a container
/// the kernel OOM-killed, and a moment later "OOMKilled". A container that died
/// of SIGKILL (137) within the last 2 s without that reason is read again once,
/// since a finished pod's status is written only once.
fn oom_reason_may_be_late(s: &ContainerStatus, now: chrono::DateTime<Utc>) -> bool {
    s.state == ContainerState::Exited
        && s.exit_code == 137
        && s.reason != "OOMKilled"
        && s.finished_at
            .is_some_and(|f| now.signed_duration_since(f) < chrono::Duration::seconds(2))
}

fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

/// Runs one pod's worker until its pod is gone from the API and the runtime.
pub async fn run(shared: Arc<Shared>, uid: String, mut rx: watch::Receiver<Option<Pod>>) {
    let mut w = Worker::new(shared.clone(), uid);
    let poke = Arc::new(tokio::sync::Notify::new());
    shared
        .pokes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(w.uid.clone(), poke.clone());
    let mut last: Option<Pod> = None;
    loop {
        let current = rx.borrow_and_update().clone();
        match current {
            None => {
                // Gone from the API without our confirmation (force delete).
                shared.probes.remove_pod(&w.uid);
                w.teardown(last.as_ref(), Duration::ZERO).await;
                w.forget();
                return;
            }
            Some(pod) if pod.metadata.deletion_timestamp.is_some() => {
                shared.probes.stop_liveness_and_startup(&w.uid);
                w.terminate(&pod).await;
                shared.probes.remove_pod(&w.uid);
                w.forget();
                return;
            }
            Some(pod) => {
                w.sync(&pod).await;
                last = Some(pod);
            }
        }
        tokio::select! {
            changed = rx.changed() => if changed.is_err() {
                // The agent dropped this worker (shutdown): leave containers running.
                return;
            },
            _ = poke.notified() => {}
            _ = tokio::time::sleep(w.next_wake()) => {}
        }
    }
}

impl Worker {
    fn new(shared: Arc<Shared>, uid: String) -> Self {
        Worker {
            shared,
            uid,
            sandbox: None,
            ips: Vec::new(),
            waiting: HashMap::new(),
            terminal: false,
            admitted: false,
            sandbox_error: None,
            volumes: PodVolumes::default(),
            acted: false,
            wake_at: None,
        }
    }

    /// How long to sleep before the next sync without a change.
    fn next_wake(&self) -> Duration {
        let now = Instant::now();
        self.wake_at
            .map(|at| at.saturating_duration_since(now))
            .map_or(self.shared.resync, |d| d.min(self.shared.resync))
    }

    fn forget(&self) {
        self.shared.devices.remove_pod(&self.uid);
        self.shared.cpus.remove_pod(&self.uid);
        self.shared.statuses.remove(&self.uid);
        self.shared.tokens.delete_service_account_token(&self.uid);
        self.shared
            .pokes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.uid);
    }

    fn rt(&self) -> &dyn Runtime {
        self.shared.runtime.as_ref()
    }

    fn uid_filter(&self) -> Filter {
        let mut labels = BTreeMap::new();
        labels.insert(LABEL_POD_UID.to_string(), self.uid.clone());
        Filter {
            sandbox_id: None,
            labels,
        }
    }

    /// The sandbox's config; without the QoS hierarchy (`--cgroups-per-qos=false`,
    /// or none could be set up) the pod goes where the runtime puts it, as
    /// upstream leaves the cgroup parent empty then.
    fn sandbox_config(&self, pod: &Pod, attempt: u32) -> SandboxConfig {
        let mut cfg = podspec::sandbox_config(&self.shared.ctx, pod, attempt);
        if !self.shared.cgroups.enabled() {
            cfg.cgroup_parent.clear();
        }
        cfg
    }

    async fn ensure_sandbox(&mut self, pod: &Pod) -> bool {
        if let Some((id, _)) = &self.sandbox {
            match self.rt().sandbox_status(id).await {
                Ok(s) if s.state == SandboxState::Ready => return true,
                Ok(_) | Err(RuntimeError::NotFound(_)) => {
                    info!(pod = %self.uid, "sandbox is not ready; recreating it");
                    self.sandbox = None;
                }
                Err(e) => {
                    warn!(error = %e, "sandbox status");
                    return false;
                }
            }
        }
        // After an agent restart: adopt this pod's ready sandbox.
        let existing = match self.rt().list_sandboxes(&self.uid_filter()).await {
            Ok(l) => l,
            Err(e) => {
                warn!(pod = %self.uid, error = %e, "listing sandboxes");
                return false;
            }
        };
        let mut attempt = 0;
        for s in &existing {
            attempt = attempt.max(s.attempt + 1);
            if s.state == SandboxState::Ready
                && let Ok(st) = self.rt().sandbox_status(&s.id).await
            {
                self.ips = st.ips;
                self.sandbox = Some((s.id.clone(), self.sandbox_config(pod, s.attempt)));
                self.write_hosts_file(pod);
                // The adopted pod counts in its QoS cgroup again; limits re-applied.
                if let Err(e) = self.shared.cgroups.ensure_pod(pod, podspec::qos(pod)) {
                    warn!(pod = %self.uid, error = %e, "pod cgroup limits");
                }
                return true;
            }
        }
        // Containers of a dead sandbox cannot be restarted in place.
        for s in &existing {
            let _ = self.rt().stop_sandbox(&s.id).await;
        }
        if let Err(e) = podspec::prepare_volumes(&self.shared.ctx, pod) {
            self.sandbox_failed(pod, &e.to_string());
            return false;
        }
        if let Some(e) = self.sandbox_security_error(pod) {
            self.sandbox_failed(pod, &e);
            return false;
        }
        let cfg = self.sandbox_config(pod, attempt);
        // The pod-level cgroup and its limits, before runc creates the sandbox in it.
        if let Err(e) = self.shared.cgroups.ensure_pod(pod, podspec::qos(pod)) {
            warn!(pod = %self.uid, error = %e, "pod cgroup limits");
        }
        let _ = std::fs::create_dir_all(&cfg.log_directory);
        match self.rt().run_sandbox(&cfg).await {
            Ok(id) => {
                self.ips = match self.rt().sandbox_status(&id).await {
                    Ok(s) => s.ips,
                    Err(_) => Vec::new(),
                };
                self.sandbox = Some((id, cfg));
                self.sandbox_error = None;
                self.write_hosts_file(pod);
                true
            }
            Err(e) => {
                self.sandbox_failed(pod, &e.to_string());
                false
            }
        }
    }

    /// The pod's IPs as its containers see them (the node's with hostNetwork).
    fn pod_ips(&self, pod: &Pod) -> Vec<String> {
        let host_network = pod
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false);
        if host_network {
            vec![self.shared.host_ip.clone()]
        } else {
            self.ips.clone()
        }
    }

    /// The managed `/etc/hosts` (`hosts.rs`), once the pod has its IPs.
    fn write_hosts_file(&self, pod: &Pod) {
        let ips = self.pod_ips(pod);
        if ips.is_empty() {
            return;
        }
        let node_hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
        let text = super::hosts::content(pod, &ips, &self.shared.ctx.cluster_domain, &node_hosts);
        let file = super::hosts::path(&podspec::pod_dir(&self.shared.ctx, pod));
        if let Err(e) = super::hosts::ensure(&file, &text) {
            warn!(pod = %self.uid, error = %e, "writing the pod's hosts file");
        }
    }

    /// The volume manager's setup of the pod's volumes; false (with a
    /// FailedMount event) while one cannot be set up.
    async fn mount_volumes(&mut self, pod: &Pod) -> bool {
        let shared = self.shared.clone();
        let cx = VolumeContext {
            objects: shared.objects.as_ref(),
            tokens: &shared.tokens,
            node: &shared.ctx,
            recorder: &shared.recorder,
            pod_ips: &self.ips,
            host_ip: &shared.host_ip,
            allocatable: &shared.allocatable,
        };
        self.volumes.mount(pod, &cx).await
    }

    fn sandbox_failed(&mut self, pod: &Pod, err: &str) {
        let msg = format!("Failed to create pod sandbox: {err}");
        if self.sandbox_error.as_deref() != Some(msg.as_str()) {
            self.shared.recorder.event(
                pod,
                EventType::Warning,
                "FailedCreatePodSandBox",
                msg.clone(),
            );
        }
        warn!(pod = %self.uid, error = %err, "sandbox creation failed");
        self.sandbox_error = Some(msg);
    }

    /// Latest and previous instance of every container of the pod.
    /// None while the runtime cannot list containers (e.g. containerd
    /// restarting): acting on an empty list would start duplicates.
    async fn try_views(&self) -> Option<HashMap<String, ContainerView>> {
        let mut by_name: HashMap<String, Vec<ContainerStatus>> = HashMap::new();
        let list = match self.rt().list_containers(&self.uid_filter()).await {
            Ok(l) => l,
            Err(e) => {
                warn!(pod = %self.uid, error = %e, "listing containers");
                return None;
            }
        };
        for c in list {
            let name = c
                .labels
                .get(LABEL_CONTAINER_NAME)
                .cloned()
                .unwrap_or(c.name.clone());
            by_name.entry(name).or_default().push(c);
        }
        let mut out = HashMap::new();
        for (name, mut list) in by_name {
            list.sort_by_key(|c| std::cmp::Reverse((c.attempt, c.created_at)));
            let mut detailed = Vec::new();
            for c in list.iter().take(2) {
                if let Ok(mut s) = self.rt().container_status(&c.id).await {
                    if oom_reason_may_be_late(&s, Utc::now()) {
                        tokio::time::sleep(OOM_REASON_WAIT).await;
                        if let Ok(again) = self.rt().container_status(&c.id).await {
                            s = again;
                        }
                    }
                    s.sandbox_id = c.sandbox_id.clone();
                    detailed.push(s);
                }
            }
            let mut it = detailed.into_iter();
            out.insert(
                name,
                ContainerView {
                    latest: it.next(),
                    previous: it.next(),
                    ..Default::default()
                },
            );
        }
        Some(out)
    }

    async fn views(&self) -> HashMap<String, ContainerView> {
        self.try_views().await.unwrap_or_default()
    }

    async fn sync(&mut self, pod: &Pod) {
        let phase_now = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("");
        if self.terminal || phase_now == "Succeeded" || phase_now == "Failed" {
            // Terminal pods keep their containers (for logs) but no sandbox.
            if !self.terminal {
                self.terminal = true;
                self.stop_sandboxes().await;
            }
            self.shared.devices.remove_pod(&self.uid);
            self.shared.cpus.remove_pod(&self.uid);
            self.shared.statuses.retry_unsent(pod).await;
            return;
        }
        if self.eviction_hook(pod).await {
            return;
        }
        if !self.admitted {
            if self.security_admission(pod).await
                || self.topology_admission(pod).await
                || self.device_admission(pod).await
            {
                return;
            }
            self.admitted = true;
        }
        match active_deadline_left(
            pod,
            self.shared.statuses.pod_status(&self.uid).as_ref(),
            Utc::now(),
        ) {
            Some(left) if left.is_zero() => {
                self.fail(pod, DEADLINE_REASON, DEADLINE_MESSAGE).await;
                return;
            }
            left => self.wake_at = left.map(|l| Instant::now() + l),
        }
        // Volumes before the sandbox, as upstream's WaitForAttachAndMount.
        let sandbox_ok = self.mount_volumes(pod).await && self.ensure_sandbox(pod).await;
        self.shared.probes.add_pod(pod);
        let policy = restart_policy(pod).to_string();
        let spec = pod.spec.clone().unwrap_or_default();
        let init = spec.init_containers.clone().unwrap_or_default();
        let Some(mut views) = self.try_views().await else {
            return;
        };
        // Sidecars gate later init containers on their startup probes.
        self.apply_probes(pod, &init, &spec.containers, &mut views);
        self.acted = false;
        if sandbox_ok {
            let ephemeral = ephemeral_containers(pod);
            let actions = compute_pod_actions(&init, &spec.containers, &ephemeral, &policy, &views);
            let find = |name: &str, is_init: bool| {
                let list = if is_init {
                    &init[..]
                } else {
                    &spec.containers[..]
                };
                list.iter().find(|c| c.name == name)
            };
            for action in actions {
                match action {
                    Action::Start { name, init } => {
                        if let Some(c) = find(&name, init) {
                            self.start(pod, c, 0, init).await;
                        }
                    }
                    Action::Restart { name, init } => {
                        let last = views.get(&name).and_then(|v| v.latest.clone());
                        if let (Some(c), Some(last)) = (find(&name, init), last) {
                            self.restart(pod, c, &last, init).await;
                        }
                    }
                    Action::StartEphemeral { name, target_id } => {
                        if let Some((c, _)) = ephemeral.iter().find(|(c, _)| c.name == name) {
                            self.start_in(pod, c, 0, false, target_id).await;
                        }
                    }
                    Action::ClearWaiting { name } => {
                        self.waiting.remove(&name);
                    }
                }
            }
            if self.acted {
                views = self.views().await;
            }
        }
        self.report(pod, &init, &spec.containers, views, sandbox_ok)
            .await;
    }

    async fn restart(&mut self, pod: &Pod, c: &Container, last: &ContainerStatus, init: bool) {
        let (name, ns, uid) = podspec::meta(pod);
        let key = backoff::container_key(name, ns, uid, &c.name, "");
        let finished = last.finished_at.unwrap_or_else(Utc::now);
        let pod_fmt = backoff::format_pod(name, ns, uid);
        let verdict = {
            let mut b = self.shared.backoff();
            backoff::restart_allowed(&mut b, &key, finished, Utc::now(), &c.name, &pod_fmt)
        };
        match verdict {
            Err(msg) => {
                let fresh = self
                    .waiting
                    .get(&c.name)
                    .is_none_or(|(r, _)| r != backoff::CRASH_LOOP_BACK_OFF);
                if fresh {
                    self.shared.recorder.event(
                        &container_ref(pod, &c.name, init),
                        EventType::Warning,
                        backoff::EVENT_BACK_OFF,
                        backoff::crash_loop_event(&c.name, &pod_fmt),
                    );
                }
                self.waiting
                    .insert(c.name.clone(), (backoff::CRASH_LOOP_BACK_OFF.into(), msg));
            }
            Ok(()) => self.start(pod, c, last.attempt + 1, init).await,
        }
    }

    /// Pulls per the pull policy (`images::puller`); the image reference,
    /// or None with the container's waiting reason set.
    async fn ensure_image(&mut self, pod: &Pod, c: &Container, init: bool) -> Option<String> {
        let puller = Puller {
            runtime: self.shared.runtime.as_ref(),
            recorder: &self.shared.recorder,
            backoff: &self.shared.backoff,
        };
        let cref = container_ref(pod, &c.name, init);
        match puller
            .ensure_image(&self.uid, &cref, c, self.waiting.get(&c.name))
            .await
        {
            Ok(image) => Some(image),
            Err(waiting) => {
                self.waiting.insert(c.name.clone(), waiting);
                None
            }
        }
    }

    async fn env_sources(
        &self,
        pod: &Pod,
        c: &Container,
    ) -> (BTreeMap<String, ConfigMap>, BTreeMap<String, Secret>) {
        let ns = podspec::meta(pod).1;
        let (cms, secrets) = envvars::referenced_objects(c);
        let mut cm_map = BTreeMap::new();
        let mut sec_map = BTreeMap::new();
        for n in cms {
            if let Ok(Some(cm)) = self.shared.objects.config_map(ns, &n).await {
                cm_map.insert(n, cm);
            }
        }
        for n in secrets {
            if let Ok(Some(s)) = self.shared.objects.secret(ns, &n).await {
                sec_map.insert(n, s);
            }
        }
        (cm_map, sec_map)
    }

    async fn start(&mut self, pod: &Pod, c: &Container, attempt: u32, init: bool) {
        self.start_in(pod, c, attempt, init, None).await
    }

    /// Starts a container; `target` is the container whose PID namespace it
    /// joins (ephemeral containers' targetContainerName).
    async fn start_in(
        &mut self,
        pod: &Pod,
        c: &Container,
        attempt: u32,
        init: bool,
        target: Option<String>,
    ) {
        self.acted = true;
        let Some((sandbox_id, sandbox_cfg)) = self.sandbox.clone() else {
            return;
        };
        let cref = container_ref(pod, &c.name, init);
        let Some(image) = self.ensure_image(pod, c, init).await else {
            return;
        };
        let (cms, secrets) = self.env_sources(pod, c).await;
        let host_ips = vec![self.shared.host_ip.clone()];
        let services: Vec<k8s_openapi::api::core::v1::Service> = self
            .shared
            .services
            .state()
            .iter()
            .map(|s| (**s).clone())
            .collect();
        let service_env = crate::servicelinks::pod_service_env(pod, &services);
        let sources = envvars::EnvSources {
            config_maps: &cms,
            secrets: &secrets,
            pod_ips: &self.ips,
            host_ips: &host_ips,
            node_allocatable: &self.shared.allocatable,
            service_env: &service_env,
        };
        let env = match envvars::make_environment(pod, c, &sources) {
            Ok(e) => e,
            Err(e) => {
                self.config_error(&cref, c, &e.to_string());
                return;
            }
        };
        let (command, args) = envvars::expand_command_and_args(c, &env);
        if let Err(e) =
            podspec::prepare_sub_paths(&self.shared.ctx, pod, self.volumes.claims(), c, &env.vars)
        {
            self.config_error(&cref, c, &e.to_string());
            return;
        }
        let mut cfg = match podspec::container_config(
            &self.shared.ctx,
            pod,
            self.volumes.claims(),
            c,
            attempt,
            &image,
            env.vars,
            command,
            args,
        ) {
            Ok(mut cfg) => {
                cfg.target_container_id = target;
                if let Some(cpus) = self.shared.cpus.container_cpuset(&self.uid, &c.name) {
                    cfg.resources.cpuset_cpus = cpus.to_string();
                }
                let ips = self.pod_ips(pod);
                cfg.mounts.extend(podspec::agent_mounts(
                    &self.shared.ctx,
                    pod,
                    c,
                    attempt,
                    &ips,
                ));
                cfg
            }
            Err(e) => {
                self.config_error(&cref, c, &e.to_string());
                return;
            }
        };
        if let Err(e) = self.apply_image_user(pod, c, &mut cfg).await {
            self.config_error(&cref, c, &e);
            return;
        }
        if let Err(e) = self
            .shared
            .devices
            .prepare_container(&self.uid, &c.name, &mut cfg)
            .await
        {
            self.config_error(&cref, c, &e);
            return;
        }
        if !super::termination::container_path(c).is_empty() {
            let dir = podspec::pod_dir(&self.shared.ctx, pod);
            let file = super::termination::host_path(&dir, &c.name, attempt);
            if let Err(e) = super::termination::prepare(&file) {
                let msg = format!("create termination-log file: {e}");
                self.config_error(&cref, c, &msg);
                return;
            }
        }
        let shared = self.shared.clone();
        let rec = &shared.recorder;
        let id = match self
            .rt()
            .create_container(&sandbox_id, &cfg, &sandbox_cfg)
            .await
        {
            Ok(id) => id,
            Err(e) => {
                rec.event(&cref, EventType::Warning, "Failed", format!("Error: {e}"));
                self.waiting.insert(
                    c.name.clone(),
                    ("CreateContainerError".into(), e.to_string()),
                );
                return;
            }
        };
        rec.event(
            &cref,
            EventType::Normal,
            "Created",
            format!("Created container: {}", c.name),
        );
        match self.rt().start_container(&id).await {
            Ok(()) => {
                rec.event(
                    &cref,
                    EventType::Normal,
                    "Started",
                    format!("Started container {}", c.name),
                );
                self.waiting.remove(&c.name);
                self.post_start(pod, c, &id, &cref).await;
            }
            Err(e) => {
                let msg = e.to_string();
                rec.event(&cref, EventType::Warning, "Failed", format!("Error: {msg}"));
                self.waiting
                    .insert(c.name.clone(), ("RunContainerError".into(), msg));
            }
        }
    }

    /// Runs the postStart hook; a failure kills the container (it is then
    /// restarted per the restart policy), as upstream.
    async fn post_start(&self, pod: &Pod, c: &Container, id: &str, cref: &ObjectReference) {
        let Some(h) = c.lifecycle.as_ref().and_then(|l| l.post_start.as_ref()) else {
            return;
        };
        let ip = self.ips.first().cloned().unwrap_or_default();
        let timeout = Duration::from_secs(30);
        if let Err(msg) = super::hooks::run(self.rt(), pod, c, id, &ip, h, timeout).await {
            let rec = &self.shared.recorder;
            rec.event(cref, EventType::Warning, "FailedPostStartHook", msg);
            rec.event(cref, EventType::Normal, "Killing", "FailedPostStartHook");
            let grace = self.grace_period(pod, None);
            let _ = self.rt().stop_container(id, grace).await;
        }
    }

    fn config_error(&mut self, cref: &ObjectReference, c: &Container, msg: &str) {
        self.shared
            .recorder
            .event(cref, EventType::Warning, "Failed", format!("Error: {msg}"));
        self.waiting.insert(
            c.name.clone(),
            ("CreateContainerConfigError".into(), msg.to_string()),
        );
    }

    /// Keeps the newest dead instance (lastState, `logs --previous`); removes older ones.
    async fn report(
        &mut self,
        pod: &Pod,
        init: &[Container],
        containers: &[Container],
        mut views: HashMap<String, ContainerView>,
        sandbox_ready: bool,
    ) {
        for (name, w) in &self.waiting {
            views.entry(name.clone()).or_default().waiting = Some(w.clone());
        }
        // A waiting reason is stale once the container runs again.
        for v in views.values_mut() {
            if v.latest
                .as_ref()
                .is_some_and(|l| l.state == ContainerState::Running)
            {
                v.waiting = None;
            }
        }
        let _ = (init, containers);
        let typed = self.generated_status(pod, &views, sandbox_ready, false);
        let phase = typed.phase.clone().unwrap_or_default();
        self.shared.statuses.set_pod_status(pod, typed).await;
        if phase == "Succeeded" || phase == "Failed" {
            self.terminal = true;
            self.stop_sandboxes().await;
        }
    }

    /// The pod's status (`crate::status::generate`, upstream's
    /// generateAPIPodStatus) from the runtime's instances, the start failures
    /// this worker remembers, and the probe manager's results.
    fn generated_status(
        &self,
        pod: &Pod,
        views: &HashMap<String, ContainerView>,
        sandbox_ready: bool,
        terminal: bool,
    ) -> k8s_openapi::api::core::v1::PodStatus {
        use crate::status::{ObservedContainer, StartFailure, StatusInput};
        let observed: Vec<ObservedContainer> = views
            .values()
            .flat_map(|v| v.latest.iter().chain(v.previous.iter()))
            .map(|c| {
                let mut o = ObservedContainer::from_runtime(c, "containerd");
                if c.state == ContainerState::Exited {
                    self.add_termination_message(pod, c, &mut o);
                }
                o
            })
            .collect();
        let running = |name: &str| {
            views
                .get(name)
                .and_then(|v| v.latest.as_ref())
                .is_some_and(|l| l.state == ContainerState::Running)
        };
        let failures: HashMap<String, StartFailure> = self
            .waiting
            .iter()
            .filter(|(name, _)| !running(name))
            .map(|(name, (reason, message))| {
                (
                    name.clone(),
                    StartFailure {
                        reason: reason.clone(),
                        message: message.clone(),
                    },
                )
            })
            .collect();
        let old = self
            .shared
            .statuses
            .pod_status(&self.uid)
            .or_else(|| pod.status.clone())
            .unwrap_or_default();
        let host_network = pod
            .spec
            .as_ref()
            .and_then(|s| s.host_network)
            .unwrap_or(false);
        let host_ips = vec![self.shared.host_ip.clone()];
        let pod_ips = if host_network {
            host_ips.clone()
        } else {
            self.ips.clone()
        };
        let input = StatusInput {
            pod,
            old: &old,
            containers: &observed,
            sandbox_ready,
            pod_ips: &pod_ips,
            host_ips: &host_ips,
            start_failures: &failures,
            terminal,
            now: Utc::now(),
        };
        crate::status::generate(&input, &self.shared.probes)
    }

    /// Appends what an exited instance left at its `terminationMessagePath`
    /// (or its log tail) to the runtime's message, as upstream.
    fn add_termination_message(
        &self,
        pod: &Pod,
        c: &ContainerStatus,
        o: &mut crate::status::ObservedContainer,
    ) {
        let Some(spec) = spec_container(pod, &c.name) else {
            return;
        };
        let dir = podspec::pod_dir(&self.shared.ctx, pod);
        let message_file = super::termination::host_path(&dir, &c.name, c.attempt);
        let log_file = podspec::container_log_file(&self.shared.ctx, pod, &c.name, c.attempt);
        let exited = super::termination::Exited {
            container: &spec,
            exit_code: c.exit_code,
            reason: &c.reason,
            message_file: &message_file,
            log_file: &log_file,
        };
        if let Some(m) = super::termination::message(&exited) {
            if !o.message.is_empty() {
                o.message.push_str(": ");
            }
            o.message.push_str(&m);
        }
    }

    /// `started`/`ready` of each container from the probe manager.
    fn apply_probes(
        &self,
        pod: &Pod,
        init: &[Container],
        containers: &[Container],
        views: &mut HashMap<String, ContainerView>,
    ) {
        let to_status = |cs: &[Container],
                         views: &HashMap<String, ContainerView>|
         -> Vec<k8s_openapi::api::core::v1::ContainerStatus> {
            cs.iter()
                .filter_map(|c| {
                    let v = views.get(&c.name).cloned().unwrap_or_default();
                    serde_json::from_value(status::container_status(c, &v)).ok()
                })
                .collect()
        };
        let mut ps = k8s_openapi::api::core::v1::PodStatus {
            container_statuses: Some(to_status(containers, views)),
            init_container_statuses: Some(to_status(init, views)),
            ..Default::default()
        };
        self.shared.probes.update_pod_status(pod, &mut ps);
        for cs in ps
            .container_statuses
            .iter()
            .flatten()
            .chain(ps.init_container_statuses.iter().flatten())
        {
            if let Some(v) = views.get_mut(&cs.name) {
                v.ready = Some(cs.ready);
                v.started = cs.started;
            }
        }
    }

    /// Kills the pod for good (upstream's SyncPodKill with a status function):
    /// its containers are stopped within the pod's grace period and the pod
    /// ends `Failed` with `reason` and `message`. Its containers stay for logs.
    async fn fail(&mut self, pod: &Pod, reason: &str, message: &str) {
        self.shared.recorder.event(
            &pod_ref(pod),
            EventType::Normal,
            reason,
            message.to_string(),
        );
        let grace = self.grace_period(pod, None);
        self.stop_containers(Some(pod), grace).await;
        let views = self.views().await;
        let mut st = self.generated_status(pod, &views, false, true);
        st.phase = Some("Failed".into());
        st.reason = Some(reason.into());
        st.message = Some(message.into());
        self.post_terminal(pod, st).await;
    }

    /// How long the pod's containers get to stop: `requested` (a deletion's
    /// grace period), else the pod's terminationGracePeriodSeconds (30), never
    /// negative and at most the agent's `max_grace`.
    fn grace_period(&self, pod: &Pod, requested: Option<i64>) -> Duration {
        let secs = requested
            .or_else(|| {
                pod.spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .unwrap_or(30)
            .max(0) as u64;
        Duration::from_secs(secs).min(self.shared.max_grace)
    }

    async fn stop_sandboxes(&mut self) {
        for s in self
            .rt()
            .list_sandboxes(&self.uid_filter())
            .await
            .unwrap_or_default()
        {
            let _ = self.rt().stop_sandbox(&s.id).await;
        }
    }

    /// Stops the pod's running containers: preStop hooks within `grace`,
    /// then SIGTERM and SIGKILL after what is left of it.
    async fn stop_containers(&self, pod: Option<&Pod>, grace: Duration) {
        let containers = self
            .rt()
            .list_containers(&self.uid_filter())
            .await
            .unwrap_or_default();
        let stops = containers
            .iter()
            .filter(|c| c.state == ContainerState::Running)
            .map(|c| {
                let this = &*self;
                async move {
                    let started = Instant::now();
                    if let Some(p) = pod {
                        let name = c
                            .labels
                            .get(LABEL_CONTAINER_NAME)
                            .cloned()
                            .unwrap_or_default();
                        let cref = container_ref(p, &name, false);
                        this.shared.recorder.event(
                            &cref,
                            EventType::Normal,
                            "Killing",
                            format!("Stopping container {name}"),
                        );
                        // preStop runs within the grace period; what is left goes to SIGTERM.
                        let spec = p
                            .spec
                            .as_ref()
                            .map(|s| s.containers.as_slice())
                            .unwrap_or(&[]);
                        if let Some(cs) = spec.iter().find(|cs| cs.name == name)
                            && let Some(h) = cs.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref())
                            && !grace.is_zero()
                        {
                            let ip = this.ips.first().cloned().unwrap_or_default();
                            if let Err(msg) =
                                super::hooks::run(this.rt(), p, cs, &c.id, &ip, h, grace).await
                            {
                                this.shared.recorder.event(
                                    &cref,
                                    EventType::Warning,
                                    "FailedPreStopHook",
                                    msg,
                                );
                            }
                        }
                    }
                    let left = grace.saturating_sub(started.elapsed());
                    this.rt().stop_container(&c.id, left).await
                }
            });
        for r in futures::future::join_all(stops).await {
            if let Err(e) = r {
                warn!(error = %e, "stopping a container");
            }
        }
    }

    /// Stops the pod's containers (SIGTERM, then SIGKILL after `grace`), then
    /// removes containers, sandboxes (and so CNI allocations), cgroups and dirs.
    async fn teardown(&mut self, pod: Option<&Pod>, grace: Duration) {
        self.stop_containers(pod, grace).await;
        self.final_status(pod).await;
        for s in self
            .rt()
            .list_sandboxes(&self.uid_filter())
            .await
            .unwrap_or_default()
        {
            if let Err(e) = self.rt().stop_sandbox(&s.id).await {
                warn!(error = %e, "stopping a sandbox");
            }
            if let Err(e) = self.rt().remove_sandbox(&s.id).await {
                warn!(error = %e, "removing a sandbox");
            }
        }
        for c in self
            .rt()
            .list_containers(&self.uid_filter())
            .await
            .unwrap_or_default()
        {
            let _ = self.rt().remove_container(&c.id).await;
        }
        if let Some(p) = pod {
            if let Err(e) = self.shared.cgroups.remove_pod(&self.uid, podspec::qos(p)) {
                warn!(pod = %self.uid, error = %e, "removing the pod cgroup");
            }
            podspec::remove_pod_dirs(&self.shared.ctx, p);
        }
        self.sandbox = None;
    }

    /// The containers' final states, posted before the pod is released.
    async fn final_status(&mut self, pod: Option<&Pod>) {
        let Some(pod) = pod else { return };
        if pod.metadata.deletion_timestamp.is_none() {
            return;
        }
        let views = self.views().await;
        // Terminal: no container runs again, so the phase is Succeeded or Failed.
        let st = self.generated_status(pod, &views, false, true);
        self.shared.statuses.set_pod_status(pod, st).await;
    }

    /// Graceful deletion: stop within the pod's grace period, clean up, then
    /// confirm with a grace-0 delete guarded by the pod's uid.
    async fn terminate(&mut self, pod: &Pod) {
        let grace = self.grace_period(pod, pod.metadata.deletion_grace_period_seconds);
        self.teardown(Some(pod), grace).await;
        self.shared.statuses.confirm_deletion(pod).await;
    }
}

/// The pod's ephemeral containers as containers, with their target's name.
/// A container of the pod's spec by name: init, regular or ephemeral.
fn spec_container(pod: &Pod, name: &str) -> Option<Container> {
    let spec = pod.spec.as_ref()?;
    spec.init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .find(|c| c.name == name)
        .cloned()
        .or_else(|| {
            ephemeral_containers(pod)
                .into_iter()
                .map(|(c, _)| c)
                .find(|c| c.name == name)
        })
}

fn ephemeral_containers(pod: &Pod) -> Vec<(Container, Option<String>)> {
    pod.spec
        .iter()
        .flat_map(|s| s.ephemeral_containers.iter().flatten())
        .filter_map(|e| {
            let target = e.target_container_name.clone();
            let mut v = serde_json::to_value(e).ok()?;
            if let Some(o) = v.as_object_mut() {
                o.remove("targetContainerName");
            }
            serde_json::from_value::<Container>(v)
                .ok()
                .map(|c| (c, target))
        })
        .collect()
}

#[cfg(test)]
mod tests;
