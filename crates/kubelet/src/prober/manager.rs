//! The probe manager (upstream's `prober.manager`): one task per
//! (pod, container, probe type) running a [`Worker`] every periodSeconds,
//! result caches per probe type, and a channel of [`ProberUpdate`]s the node
//! agent consumes (result changes, events to record, containers to restart).
//!
//! The agent gives the manager its view of pod statuses through
//! [`PodStatusProvider`] and asks it, when generating a status, which
//! containers have started and are ready ([`ProbeManager::update_pod_status`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use berth_runtime::Clock;
use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodStatus};
use tokio::sync::{Notify, mpsc, watch};

use super::worker::{Change, Results, Step, Worker};
use super::{
    KillReason, ProbeEvent, ProbeResult, ProbeType, Prober, kill_grace_period, kill_message,
};

/// The agent's current status of a pod (upstream's status manager).
pub trait PodStatusProvider: Send + Sync + 'static {
    fn pod_status(&self, pod_uid: &str) -> Option<PodStatus>;
}

/// The clock's time as the status types hold it (container start times are
/// wall-clock).
fn wall(clock: &dyn Clock) -> DateTime<Utc> {
    let nanos = clock.now().as_nanosecond();
    DateTime::from_timestamp_nanos(i64::try_from(nanos).unwrap_or(i64::MAX))
}

/// A liveness or startup probe failed failureThreshold times: the container
/// must be killed with a `Killing` event carrying `message`, and restarted
/// unless the pod's restartPolicy is Never.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartRequest {
    pub pod_uid: String,
    pub namespace: String,
    pub pod_name: String,
    pub container: String,
    /// `spec.containers{app}` or `spec.initContainers{sidecar}`, for the event.
    pub field_path: String,
    pub container_id: String,
    pub reason: KillReason,
    /// `Container app failed liveness probe, will be restarted`.
    pub message: String,
    pub grace_period_seconds: i64,
}

/// What the manager tells the node agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProberUpdate {
    /// A cached result changed: regenerate the pod's status.
    Result {
        pod_uid: String,
        container: String,
        container_id: String,
        probe_type: ProbeType,
        result: ProbeResult,
    },
    /// An event to record on the container (`spec.containers{name}`).
    Event {
        pod_uid: String,
        namespace: String,
        pod_name: String,
        container: String,
        event: ProbeEvent,
    },
    Restart(RestartRequest),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct WorkerKey {
    pod_uid: String,
    container: String,
    probe_type: ProbeType,
}

struct Handle {
    generation: u64,
    stop: watch::Sender<bool>,
    trigger: Arc<Notify>,
}

#[derive(Default)]
struct Caches {
    liveness: Results,
    readiness: Results,
    startup: Results,
}

impl Caches {
    fn of(&mut self, t: ProbeType) -> &mut Results {
        match t {
            ProbeType::Liveness => &mut self.liveness,
            ProbeType::Readiness => &mut self.readiness,
            ProbeType::Startup => &mut self.startup,
        }
    }
}

struct Inner {
    prober: Prober,
    status: Arc<dyn PodStatusProvider>,
    clock: Arc<dyn Clock>,
    start: DateTime<Utc>,
    workers: Mutex<HashMap<WorkerKey, Handle>>,
    caches: Mutex<Caches>,
    updates: mpsc::UnboundedSender<ProberUpdate>,
    next_generation: Mutex<u64>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs probe workers and answers probe-derived container state.
#[derive(Clone)]
pub struct ProbeManager {
    inner: Arc<Inner>,
}

fn uid(pod: &Pod) -> String {
    pod.metadata.uid.clone().unwrap_or_default()
}

/// Whether an init container runs for the pod's lifetime (a sidecar).
pub fn is_restartable_init(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

impl ProbeManager {
    pub fn new(
        prober: Prober,
        status: Arc<dyn PodStatusProvider>,
        clock: Arc<dyn Clock>,
    ) -> (Self, mpsc::UnboundedReceiver<ProberUpdate>) {
        let start = wall(clock.as_ref());
        Self::with_start(prober, status, clock, start)
    }

    /// As [`ProbeManager::new`], with the time the agent started (workers of
    /// an agent that started less than a period ago wait a random part of it).
    pub fn with_start(
        prober: Prober,
        status: Arc<dyn PodStatusProvider>,
        clock: Arc<dyn Clock>,
        start: DateTime<Utc>,
    ) -> (Self, mpsc::UnboundedReceiver<ProberUpdate>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let inner = Inner {
            prober,
            status,
            clock,
            start,
            workers: Mutex::new(HashMap::new()),
            caches: Mutex::new(Caches::default()),
            updates: tx,
            next_generation: Mutex::new(0),
        };
        (
            Self {
                inner: Arc::new(inner),
            },
            rx,
        )
    }

    /// Starts workers for every probe of the pod's containers and sidecars
    /// that has none yet (must run inside a tokio runtime).
    pub fn add_pod(&self, pod: &Pod) {
        let Some(spec) = &pod.spec else { return };
        let pod = Arc::new(pod.clone());
        let sidecars = spec
            .init_containers
            .iter()
            .flatten()
            .filter(|c| is_restartable_init(c));
        for c in spec.containers.iter().chain(sidecars) {
            for ty in [
                ProbeType::Startup,
                ProbeType::Readiness,
                ProbeType::Liveness,
            ] {
                let Some(w) = Worker::new(ty, c) else {
                    continue;
                };
                let key = WorkerKey {
                    pod_uid: uid(&pod),
                    container: c.name.clone(),
                    probe_type: ty,
                };
                let mut workers = lock(&self.inner.workers);
                if workers.contains_key(&key) {
                    continue;
                }
                let generation = {
                    let mut g = lock(&self.inner.next_generation);
                    *g += 1;
                    *g
                };
                let (stop, stop_rx) = watch::channel(false);
                let trigger = Arc::new(Notify::new());
                workers.insert(
                    key.clone(),
                    Handle {
                        generation,
                        stop,
                        trigger: trigger.clone(),
                    },
                );
                drop(workers);
                let task = WorkerTask {
                    inner: self.inner.clone(),
                    key,
                    generation,
                    pod: pod.clone(),
                    container: c.clone(),
                    worker: w,
                };
                tokio::spawn(task.run(stop_rx, trigger));
            }
        }
    }

    fn stop_where(&self, f: impl Fn(&WorkerKey) -> bool) {
        for (k, h) in lock(&self.inner.workers).iter() {
            if f(k) {
                let _ = h.stop.send(true);
            }
        }
    }

    /// Stops a terminating pod's liveness and startup workers (readiness
    /// keeps running so the pod leaves endpoints as it shuts down).
    pub fn stop_liveness_and_startup(&self, pod_uid: &str) {
        self.stop_where(|k| k.pod_uid == pod_uid && k.probe_type != ProbeType::Readiness);
    }

    /// Stops every worker of the pod.
    pub fn remove_pod(&self, pod_uid: &str) {
        self.stop_where(|k| k.pod_uid == pod_uid);
    }

    /// Stops the workers of pods not in `desired`.
    pub fn cleanup_pods(&self, desired: &HashSet<String>) {
        self.stop_where(|k| !desired.contains(&k.pod_uid));
    }

    /// Number of running workers (for tests and metrics).
    pub fn worker_count(&self) -> usize {
        lock(&self.inner.workers).len()
    }

    fn has_worker(&self, pod_uid: &str, container: &str, t: ProbeType) -> bool {
        lock(&self.inner.workers).contains_key(&WorkerKey {
            pod_uid: pod_uid.into(),
            container: container.into(),
            probe_type: t,
        })
    }

    fn result(&self, t: ProbeType, container_id: &str) -> Option<ProbeResult> {
        lock(&self.inner.caches).of(t).get(container_id).copied()
    }

    pub fn liveness(&self, container_id: &str) -> Option<ProbeResult> {
        self.result(ProbeType::Liveness, container_id)
    }

    pub fn readiness(&self, container_id: &str) -> Option<ProbeResult> {
        self.result(ProbeType::Readiness, container_id)
    }

    pub fn startup(&self, container_id: &str) -> Option<ProbeResult> {
        self.result(ProbeType::Startup, container_id)
    }

    /// Whether a running container has started (`isContainerStarted`): its
    /// startup probe succeeded, or it has none.
    pub fn is_started(&self, pod_uid: &str, cs: &ContainerStatus) -> bool {
        let running = cs.state.as_ref().is_some_and(|s| s.running.is_some());
        if !running {
            return false;
        }
        if let Some(r) = cs.container_id.as_deref().and_then(|id| self.startup(id)) {
            return r == ProbeResult::Success;
        }
        !self.has_worker(pod_uid, &cs.name, ProbeType::Startup)
    }

    /// Whether a started, running container is ready; a readiness probe that
    /// has not answered yet is triggered at once.
    fn is_ready(&self, pod_uid: &str, cs: &ContainerStatus) -> bool {
        let running = cs.state.as_ref().is_some_and(|s| s.running.is_some());
        if !running {
            return false;
        }
        if cs.container_id.as_deref().and_then(|id| self.readiness(id))
            == Some(ProbeResult::Success)
        {
            return true;
        }
        let key = WorkerKey {
            pod_uid: pod_uid.into(),
            container: cs.name.clone(),
            probe_type: ProbeType::Readiness,
        };
        match lock(&self.inner.workers).get(&key) {
            Some(h) => {
                h.trigger.notify_one();
                false
            }
            None => true,
        }
    }

    /// Sets `started` and `ready` of the pod's container statuses
    /// (upstream's `UpdatePodStatus`).
    pub fn update_pod_status(&self, pod: &Pod, status: &mut PodStatus) {
        let pod_uid = uid(pod);
        for cs in status.container_statuses.iter_mut().flatten() {
            let started = self.is_started(&pod_uid, cs);
            cs.started = Some(started);
            if started {
                cs.ready = self.is_ready(&pod_uid, cs);
            } else {
                cs.ready = false;
            }
        }
        let init_specs = pod
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.clone())
            .unwrap_or_default();
        for cs in status.init_container_statuses.iter_mut().flatten() {
            let started = self.is_started(&pod_uid, cs);
            cs.started = Some(started);
            let sidecar = init_specs
                .iter()
                .find(|c| c.name == cs.name)
                .is_some_and(is_restartable_init);
            if !sidecar {
                let done = cs
                    .state
                    .as_ref()
                    .and_then(|s| s.terminated.as_ref())
                    .is_some_and(|t| t.exit_code == 0);
                if done {
                    cs.ready = true;
                }
                continue;
            }
            cs.ready = started && self.is_ready(&pod_uid, cs);
        }
    }
}

impl crate::status::ProbeView for ProbeManager {
    fn update_pod_status(&self, pod: &Pod, status: &mut PodStatus) {
        ProbeManager::update_pod_status(self, pod, status)
    }
}

struct WorkerTask {
    inner: Arc<Inner>,
    key: WorkerKey,
    generation: u64,
    pod: Arc<Pod>,
    container: Container,
    worker: Worker,
}

impl WorkerTask {
    fn publish(&self, changes: Vec<Change>) {
        for c in changes {
            let _ = self.inner.updates.send(ProberUpdate::Result {
                pod_uid: self.key.pod_uid.clone(),
                container: self.key.container.clone(),
                container_id: c.container_id,
                probe_type: self.key.probe_type,
                result: c.result,
            });
        }
    }

    async fn run(mut self, mut stop: watch::Receiver<bool>, trigger: Arc<Notify>) {
        let period = self.worker.timing.period();
        // Right after the agent starts, spread the workers over a period.
        let since_start = (wall(self.inner.clock.as_ref()) - self.inner.start)
            .to_std()
            .unwrap_or(Duration::ZERO);
        if since_start < period {
            let jitter = jitter(&self.key, period);
            tokio::select! {
                _ = tokio::time::sleep(jitter) => {}
                _ = stop.changed() => { self.finish(); return; }
            }
        }
        let mut ticker = tokio::time::interval(period);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await; // the first tick is immediate
        while self.do_probe().await {
            tokio::select! {
                _ = stop.changed() => break,
                _ = ticker.tick() => {}
                // A manual run restarts the period from now, as upstream.
                _ = trigger.notified() => ticker.reset(),
            }
            if *stop.borrow() {
                break;
            }
        }
        self.finish();
    }

    async fn do_probe(&mut self) -> bool {
        let status = self.inner.status.pod_status(&self.key.pod_uid);
        let now = wall(self.inner.clock.as_ref());
        let mut changes = Vec::new();
        let step = {
            let mut caches = lock(&self.inner.caches);
            let results = caches.of(self.key.probe_type);
            self.worker
                .before_probe(&self.pod, status.as_ref(), now, results, &mut changes)
        };
        self.publish(changes);
        let container_id = match step {
            Step::Stop => return false,
            Step::Wait => return true,
            Step::Probe { container_id } => container_id,
        };
        let pod_ip = status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default();
        let run = self
            .inner
            .prober
            .probe(
                self.key.probe_type,
                &self.pod,
                &pod_ip,
                &self.container,
                &container_id,
            )
            .await;
        if let Some(event) = run.event {
            let _ = self.inner.updates.send(ProberUpdate::Event {
                pod_uid: self.key.pod_uid.clone(),
                namespace: self.pod.metadata.namespace.clone().unwrap_or_default(),
                pod_name: self.pod.metadata.name.clone().unwrap_or_default(),
                container: self.key.container.clone(),
                event,
            });
        }
        if run.errored {
            return true; // thrown away, as upstream
        }
        let mut changes = Vec::new();
        let restart = {
            let mut caches = lock(&self.inner.caches);
            let results = caches.of(self.key.probe_type);
            self.worker.after_probe(run.result, results, &mut changes)
        };
        self.publish(changes);
        if restart {
            let reason = match self.key.probe_type {
                ProbeType::Startup => KillReason::StartupProbe,
                _ => KillReason::LivenessProbe,
            };
            let _ = self
                .inner
                .updates
                .send(ProberUpdate::Restart(RestartRequest {
                    pod_uid: self.key.pod_uid.clone(),
                    namespace: self.pod.metadata.namespace.clone().unwrap_or_default(),
                    pod_name: self.pod.metadata.name.clone().unwrap_or_default(),
                    container: self.key.container.clone(),
                    field_path: super::container_field_path(&self.pod, &self.key.container),
                    container_id,
                    reason,
                    message: kill_message(&self.key.container, reason, &self.pod),
                    grace_period_seconds: kill_grace_period(&self.pod, &self.container, reason),
                }));
        }
        true
    }

    /// Drops this worker's result and its registration (if still its own).
    fn finish(&self) {
        if let Some(id) = self.worker.container_id() {
            lock(&self.inner.caches).of(self.key.probe_type).remove(id);
        }
        let mut workers = lock(&self.inner.workers);
        if workers
            .get(&self.key)
            .is_some_and(|h| h.generation == self.generation)
        {
            workers.remove(&self.key);
        }
    }
}

/// A deterministic spread in [0, period) from the worker's identity.
fn jitter(key: &WorkerKey, period: Duration) -> Duration {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    let ms = period.as_millis().max(1) as u64;
    Duration::from_millis(h.finish() % ms)
}

#[cfg(test)]
mod tests {
    //! The seed's StartupProbe demo on simulated time: a container that
    //! becomes healthy 15 s after it starts, probed by a strict liveness probe
    //! (period 5, failureThreshold 1), with and without a startup probe
    //! (period 3, failureThreshold 30). The test plays the node agent: it
    //! kills containers on restart requests (the shell ignores SIGTERM, so a
    //! kill takes the 30 s grace period) and restarts them under
    //! CrashLoopBackOff.

    use super::*;
    use crate::backoff::{self, Backoff};
    use crate::prober::exec::{ExecError, ExecInContainer, ExecOutput};
    use crate::status::{ObservedContainer, StartFailure, State, StatusInput};
    use serde_json::json;
    use tokio::time::Instant;

    struct SimClock {
        base: DateTime<Utc>,
        at: Instant,
    }

    impl SimClock {
        fn now(&self) -> DateTime<Utc> {
            self.base + chrono::Duration::from_std(self.at.elapsed()).unwrap()
        }
    }

    impl Clock for SimClock {
        fn now(&self) -> k8s_openapi::jiff::Timestamp {
            let nanos = SimClock::now(self).timestamp_nanos_opt().unwrap();
            k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(nanos)).unwrap()
        }
    }

    type Starts = Arc<Mutex<HashMap<String, DateTime<Utc>>>>;

    /// `test -f /tmp/healthy`: true 15 s after the container started.
    struct HealthyAfter15s {
        clock: Arc<SimClock>,
        starts: Starts,
        calls: Mutex<Vec<String>>,
    }

    #[async_trait::async_trait]
    impl ExecInContainer for HealthyAfter15s {
        async fn exec_sync(
            &self,
            id: &str,
            cmd: &[String],
            _: Duration,
        ) -> Result<ExecOutput, ExecError> {
            lock(&self.calls).push(format!("{id} {}", cmd.join(" ")));
            let started = lock(&self.starts)
                .get(id)
                .copied()
                .ok_or(ExecError::Other("no such container".into()))?;
            let healthy = self.clock.now() - started >= chrono::Duration::seconds(15);
            Ok(ExecOutput {
                exit_code: if healthy { 0 } else { 1 },
                ..Default::default()
            })
        }
    }

    struct Provider(Arc<Mutex<PodStatus>>);

    impl PodStatusProvider for Provider {
        fn pod_status(&self, _: &str) -> Option<PodStatus> {
            Some(lock(&self.0).clone())
        }
    }

    fn myapp(startup: bool) -> Pod {
        let exec = json!({"exec": {"command": ["test", "-f", "/tmp/healthy"]}});
        let mut c = json!({"name": "busybox", "image": "busybox",
            "command": ["/bin/sh"], "args": ["-c", "sleep 15; touch /tmp/healthy; tail -f /dev/null"],
            "livenessProbe": {"exec": exec["exec"], "failureThreshold": 1, "periodSeconds": 5}});
        if startup {
            c["startupProbe"] =
                json!({"exec": exec["exec"], "failureThreshold": 30, "periodSeconds": 3});
        }
        serde_json::from_value(json!({"metadata": {"name": "myapp-1", "namespace": "default", "uid": "u1"},
            "spec": {"restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "containers": [c]}}))
        .unwrap()
    }

    #[derive(Default, Debug)]
    struct Seen {
        restarts: u32,
        kills: Vec<String>,
        unhealthy: Vec<String>,
        crash_loop: Vec<String>,
        started_at: Vec<i64>,
        became_started: Option<i64>,
        /// `kubectl get po` every second: (seconds, READY, STATUS, RESTARTS).
        rows: Vec<(i64, String, String, String)>,
    }

    async fn simulate(pod: Pod, secs: u64) -> Seen {
        let clock = Arc::new(SimClock {
            base: Utc::now(),
            at: Instant::now(),
        });
        let starts: Starts = Arc::default();
        let exec = Arc::new(HealthyAfter15s {
            clock: clock.clone(),
            starts: starts.clone(),
            calls: Mutex::default(),
        });
        let status = Arc::new(Mutex::new(
            serde_json::from_value::<PodStatus>(json!({"phase": "Pending", "podIP": "10.1.0.5"}))
                .unwrap(),
        ));
        // The agent has been up for a while: no start-up jitter.
        let (m, mut rx) = ProbeManager::with_start(
            Prober::new(exec.clone()),
            Arc::new(Provider(status.clone())),
            clock.clone(),
            clock.now() - chrono::Duration::hours(1),
        );
        m.add_pod(&pod);
        assert_eq!(
            m.worker_count(),
            if pod.spec.as_ref().unwrap().containers[0]
                .startup_probe
                .is_some()
            {
                2
            } else {
                1
            }
        );

        let t0 = clock.now();
        let secs_since = |t: DateTime<Utc>| (t - t0).num_seconds();
        let end = Instant::now() + Duration::from_secs(secs);
        let mut seen = Seen::default();
        let mut b = Backoff::default();
        let key = backoff::container_key("myapp-1", "default", "u1", "busybox", "h");
        let pod_name = backoff::format_pod("myapp-1", "default", "u1");
        // The agent's view: every container instance, its start failures, and
        // the status it generates from them (what the prober reads back).
        let mut instances: Vec<ObservedContainer> = Vec::new();
        let mut failures: HashMap<String, StartFailure> = HashMap::new();
        let refresh = |instances: &[ObservedContainer],
                       failures: &HashMap<String, StartFailure>| {
            let old = lock(&status).clone();
            let input = StatusInput {
                pod: &pod,
                old: &old,
                containers: instances,
                sandbox_ready: true,
                pod_ips: &["10.1.0.5".to_string()],
                host_ips: &["192.168.1.10".to_string()],
                start_failures: failures,
                terminal: false,
                now: clock.now(),
            };
            let new = crate::status::generate(&input, &m);
            *lock(&status) = new;
        };
        // The first container starts 1 s after the pod is added.
        let mut next_start = Some(Instant::now() + Duration::from_secs(1));
        let mut dying: Option<Instant> = None;
        let mut last_finished = t0;
        let mut sample = tokio::time::interval(Duration::from_secs(1));
        loop {
            let wake = [next_start, dying, Some(end)]
                .into_iter()
                .flatten()
                .min()
                .unwrap();
            tokio::select! {
                u = rx.recv() => match u.unwrap() {
                    ProberUpdate::Restart(r) => {
                        assert_eq!(Some(&r.container_id), instances.last().map(|i| &i.id));
                        assert_eq!(r.grace_period_seconds, 30);
                        assert_eq!(r.field_path, "spec.containers{busybox}");
                        seen.kills.push(r.message);
                        dying = Some(Instant::now() + Duration::from_secs(30));
                    }
                    ProberUpdate::Event { event, .. } => seen.unhealthy.push(format!("{} {}", event.reason, event.message)),
                    ProberUpdate::Result { probe_type, result, .. } => {
                        refresh(&instances, &failures);
                        let started = lock(&status).container_statuses.as_ref().unwrap()[0].started == Some(true);
                        if probe_type == ProbeType::Startup && result == ProbeResult::Success && started && seen.became_started.is_none() {
                            seen.became_started = Some(secs_since(clock.now()));
                        }
                    }
                },
                _ = sample.tick() => {
                    refresh(&instances, &failures);
                    let mut v = serde_json::to_value(&pod).unwrap();
                    v["status"] = serde_json::to_value(&*lock(&status)).unwrap();
                    let cells = berth_api::printers::cells("", "Pod", &v, clock.now());
                    let cell = |i: usize| cells[i].as_str().unwrap_or_default().to_string();
                    seen.rows.push((secs_since(clock.now()), cell(1), cell(2), cell(3)));
                }
                _ = tokio::time::sleep_until(wake) => {
                    let now = clock.now();
                    if Instant::now() >= end {
                        break;
                    }
                    if dying.is_some_and(|d| Instant::now() >= d) {
                        dying = None;
                        last_finished = now;
                        if let Some(i) = instances.last_mut() {
                            i.state = State::Exited;
                            i.exit_code = 137;
                            i.reason = "Error".into();
                            i.finished_at = Some(now);
                        }
                        refresh(&instances, &failures);
                        next_start = Some(Instant::now());
                    }
                    if next_start.is_some_and(|s| Instant::now() >= s) {
                        next_start = None;
                        let first = instances.is_empty();
                        match if first { Ok(()) } else { backoff::restart_allowed(&mut b, &key, last_finished, now, "busybox", &pod_name) } {
                            Ok(()) => {
                                if !first {
                                    seen.restarts += 1;
                                }
                                let id = format!("containerd://c{}", seen.restarts);
                                lock(&starts).insert(id.clone(), now);
                                seen.started_at.push(secs_since(now));
                                instances.push(ObservedContainer {
                                    id,
                                    name: "busybox".into(),
                                    state: State::Running,
                                    created_at: Some(now),
                                    started_at: Some(now),
                                    finished_at: None,
                                    exit_code: 0,
                                    reason: String::new(),
                                    message: String::new(),
                                    image: "docker.io/library/busybox:latest".into(),
                                    image_ref: "docker.io/library/busybox@sha256:1".into(),
                                    restart_count: seen.restarts as i32,
                                });
                                failures.remove("busybox");
                                refresh(&instances, &failures);
                            }
                            Err(msg) => {
                                seen.crash_loop.push(msg.clone());
                                failures.insert("busybox".into(), StartFailure { reason: "CrashLoopBackOff".into(), message: msg });
                                refresh(&instances, &failures);
                                let retry = last_finished + chrono::Duration::from_std(b.get(&key)).unwrap();
                                next_start = Some(Instant::now() + (retry - now).to_std().unwrap_or_default());
                            }
                        }
                    }
                }
            }
        }
        m.remove_pod("u1");
        seen
    }

    #[tokio::test(start_paused = true)]
    async fn seed_demo_without_startup_probe_crash_loops() {
        let seen = simulate(myapp(false), 300).await;
        // Every container is killed before it becomes healthy at 15 s.
        assert!(seen.restarts >= 4, "{seen:?}");
        assert!(
            seen.kills
                .iter()
                .all(|k| k == "Container busybox failed liveness probe, will be restarted"),
            "{seen:?}"
        );
        assert!(seen.kills.len() >= 4);
        assert!(
            seen.unhealthy
                .iter()
                .all(|e| e == "Unhealthy Liveness probe failed: "),
            "{seen:?}"
        );
        assert_eq!(
            seen.crash_loop.first().map(String::as_str),
            Some("back-off 10s restarting failed container=busybox pod=myapp-1_default(u1)")
        );
        assert!(
            seen.crash_loop
                .iter()
                .any(|m| m.starts_with("back-off 40s ")),
            "{seen:?}"
        );
        // The gaps between starts grow with the back-off.
        let gaps: Vec<i64> = seen.started_at.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.windows(2).all(|g| g[1] >= g[0]), "{gaps:?}");
        // What `kubectl get po -l app=myapp` shows: the restarts grow, and the
        // pod sits in CrashLoopBackOff with 4 restarts as in the seed.
        let at = |t: i64| seen.rows.iter().find(|r| r.0 == t).cloned().unwrap();
        assert_eq!(at(10), (10, "1/1".into(), "Running".into(), "0".into()));
        let restarts: Vec<u32> = seen
            .rows
            .iter()
            .map(|r| r.3.split(' ').next().unwrap().parse().unwrap())
            .collect();
        assert!(restarts.windows(2).all(|w| w[1] >= w[0]), "{restarts:?}");
        let looping: Vec<_> = seen
            .rows
            .iter()
            .filter(|r| r.2 == "CrashLoopBackOff")
            .collect();
        assert!(!looping.is_empty(), "{:?}", seen.rows);
        let last = seen.rows.last().unwrap();
        assert_eq!(
            (last.1.as_str(), last.2.as_str()),
            ("0/1", "CrashLoopBackOff"),
            "{:?}",
            seen.rows
        );
        assert!(
            last.3.starts_with("4 (") && last.3.ends_with(" ago)"),
            "{last:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn seed_demo_with_startup_probe_runs() {
        let seen = simulate(myapp(true), 120).await;
        // `kubectl get po`: not ready while starting, then 1/1 Running with no
        // restarts (the seed checks it 60 s later).
        let at = |t: i64| seen.rows.iter().find(|r| r.0 == t).cloned().unwrap();
        assert_eq!(at(10), (10, "0/1".into(), "Running".into(), "0".into()));
        assert_eq!(at(60), (60, "1/1".into(), "Running".into(), "0".into()));
        assert!(
            seen.rows
                .iter()
                .all(|r| r.3 == "0" && r.2 == "Running" || r.0 < 2),
            "{:?}",
            seen.rows
        );
        assert_eq!(seen.restarts, 0, "{seen:?}");
        assert!(seen.kills.is_empty(), "{seen:?}");
        // Started after the 15 s sleep, on a startup probe tick (every 3 s).
        let started = seen.became_started.expect("the startup probe succeeded");
        assert!((16..=19).contains(&started), "{started}");
        // Only startup failures were reported, never liveness ones.
        assert!(!seen.unhealthy.is_empty());
        assert!(
            seen.unhealthy
                .iter()
                .all(|e| e == "Unhealthy Startup probe failed: "),
            "{seen:?}"
        );
    }
}
