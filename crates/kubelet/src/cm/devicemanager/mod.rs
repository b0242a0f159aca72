//! The Device Manager (upstream's `pkg/kubelet/cm/devicemanager`): device plugins
//! register on `<data-dir>/agent/device-plugins/kubelet.sock`, the agent dials
//! each back on its socket, follows `ListAndWatch` (devices and their health →
//! the Node's capacity and allocatable of the extended resource), allocates
//! devices to containers at pod admission (`GetPreferredAllocation` when offered,
//! then `Allocate`), calls `PreStartContainer` when the plugin asks for it, and
//! applies the plugin's envs, mounts, device nodes, annotations and CDI devices
//! to the container's CRI config. Allocations are checkpointed in
//! `kubelet_internal_checkpoint`, so an agent restart keeps them; plugins
//! re-register when they see `kubelet.sock` re-created. It is a hint provider
//! of the Topology Manager (`hints.rs`): devices admitted with a NUMA
//! affinity are reserved then, aligned ones first, and allocated from that
//! reservation.

pub mod endpoint;
mod hints;
pub mod plugin;
pub mod pod_devices;
pub mod registration;
pub mod topology_hints;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use berth_api::quantity::{Format, Quantity};
use k8s_openapi::api::core::v1::{Container, Pod};
use tracing::{info, warn};

use crate::node::Resources;
use crate::runtime::ContainerConfig;
use pod_devices::{Allocation, PodDevices};

/// The device plugin API v1beta1 (`v1beta1`).
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("v1beta1");
}

/// The agent's socket name in the device-plugins directory.
pub const KUBELET_SOCKET: &str = "kubelet.sock";
/// A device's health values in ListAndWatch.
pub const HEALTHY: &str = "Healthy";
pub const UNHEALTHY: &str = "Unhealthy";
/// How long a stopped plugin's resource stays in the Node's capacity (with no
/// allocatable devices) before it is removed: upstream's endpointStopGracePeriod.
pub const ENDPOINT_STOP_GRACE_PERIOD: Duration = Duration::from_secs(5 * 60);
/// The admission failure of an Allocate error (upstream's
/// `UnexpectedAdmissionError`).
pub const UNEXPECTED_ADMISSION_ERROR: &str = "UnexpectedAdmissionError";

/// The device-plugins directory under the agent's directory.
pub fn plugins_dir(agent_dir: &Path) -> PathBuf {
    agent_dir.join("device-plugins")
}

#[derive(Debug, thiserror::Error)]
pub enum DeviceManagerError {
    #[error("device manager: {0}")]
    Io(#[from] std::io::Error),
    #[error("device manager checkpoint: {0}")]
    Checkpoint(String),
}

/// One registered resource.
#[derive(Debug, Default)]
struct ResourceState {
    devices: BTreeMap<String, pb::Device>,
    options: pb::DevicePluginOptions,
    /// The plugin's socket; None for a resource known only from the checkpoint.
    socket: Option<PathBuf>,
    /// When the plugin's stream ended (None while it is connected).
    stopped_at: Option<Instant>,
    /// Bumped at each registration, so a replaced connection's stream ending
    /// does not mark the new one stopped.
    generation: u64,
}

#[derive(Debug, Default)]
struct State {
    resources: BTreeMap<String, ResourceState>,
    pod_devices: PodDevices,
    /// Devices the Topology Manager's admission chose for a container, until
    /// its plugin's Allocate: (pod UID, container) → resource → device IDs.
    reserved: BTreeMap<(String, String), BTreeMap<String, Vec<String>>>,
}

impl State {
    /// Devices of `resource` allocated or reserved, by any pod (`Some(uid)`:
    /// by that pod only).
    fn in_use(&self, resource: &str, pod: Option<&str>) -> BTreeSet<String> {
        let mut out = match pod {
            Some(uid) => self.pod_devices.pod_in_use(uid, resource),
            None => self.pod_devices.in_use(resource),
        };
        for ((uid, _), m) in &self.reserved {
            if pod.is_none_or(|p| p == uid)
                && let Some(ids) = m.get(resource)
            {
                out.extend(ids.iter().cloned());
            }
        }
        out
    }

    fn release_reservations(&mut self, pod_uid: &str) {
        self.reserved.retain(|(uid, _), _| uid != pod_uid);
    }
}

/// The Device Manager of one node agent.
pub struct DeviceManager {
    dir: PathBuf,
    state: Mutex<State>,
    /// Admissions one at a time, so two pods never pick the same device.
    admit_lock: tokio::sync::Mutex<()>,
    call_timeout: Duration,
    /// The machine's NUMA node ids, over which device hints are built.
    numa_nodes: Vec<usize>,
}

impl DeviceManager {
    /// Loads the checkpoint of `dir` (the device-plugins directory) and serves
    /// the Registration service on its `kubelet.sock`; `numa_nodes` are the
    /// machine's NUMA node ids.
    pub async fn start(
        dir: PathBuf,
        numa_nodes: Vec<usize>,
    ) -> Result<Arc<DeviceManager>, DeviceManagerError> {
        std::fs::create_dir_all(&dir)?;
        let mut state = State::default();
        if let Some(cp) =
            pod_devices::read_checkpoint(&dir).map_err(DeviceManagerError::Checkpoint)?
        {
            state.pod_devices =
                PodDevices::from_checkpoint(&cp).map_err(DeviceManagerError::Checkpoint)?;
            // Registered devices come back unhealthy until their plugin
            // re-registers, as upstream's readCheckpoint does.
            for (resource, ids) in cp.data.registered_devices {
                let r = state.resources.entry(resource).or_default();
                r.stopped_at = Some(Instant::now());
                for id in ids {
                    r.devices.insert(
                        id.clone(),
                        pb::Device {
                            id,
                            health: UNHEALTHY.into(),
                            topology: None,
                        },
                    );
                }
            }
        }
        let dm = Arc::new(DeviceManager {
            dir,
            state: Mutex::new(state),
            admit_lock: tokio::sync::Mutex::new(()),
            call_timeout: Duration::from_secs(10),
            numa_nodes,
        });
        endpoint::serve_registration(dm.clone()).await?;
        Ok(dm)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A plugin registered (already validated): remember it, replacing an
    /// earlier registration of the same resource; returns its generation.
    fn registered(&self, resource: &str, socket: PathBuf, options: pb::DevicePluginOptions) -> u64 {
        let mut st = self.lock();
        let r = st.resources.entry(resource.to_string()).or_default();
        r.generation += 1;
        r.socket = Some(socket);
        r.options = options;
        r.stopped_at = None;
        r.generation
    }

    /// A ListAndWatch answer: the resource's full device list.
    fn update_devices(&self, resource: &str, generation: u64, devices: Vec<pb::Device>) {
        {
            let mut st = self.lock();
            let Some(r) = st.resources.get_mut(resource) else {
                return;
            };
            if r.generation != generation {
                return;
            }
            r.devices = devices.into_iter().map(|d| (d.id.clone(), d)).collect();
        }
        self.checkpoint();
    }

    /// The plugin's stream ended: its devices go unhealthy at once, the
    /// resource leaves capacity after the grace period.
    fn stopped(&self, resource: &str, generation: u64) {
        let mut st = self.lock();
        if let Some(r) = st.resources.get_mut(resource)
            && r.generation == generation
        {
            r.stopped_at = Some(Instant::now());
            for d in r.devices.values_mut() {
                d.health = UNHEALTHY.into();
            }
        }
    }

    /// The extended resources' capacity (every device) and allocatable (the
    /// healthy ones). A resource whose plugin stopped more than the grace period
    /// ago is reported as 0 once, then dropped.
    pub fn capacity(&self) -> (Resources, Resources) {
        let mut st = self.lock();
        let mut cap = Resources::new();
        let mut alloc = Resources::new();
        let now = Instant::now();
        let mut expired = Vec::new();
        for (name, r) in &st.resources {
            let gone = r
                .stopped_at
                .is_some_and(|t| now.duration_since(t) >= ENDPOINT_STOP_GRACE_PERIOD);
            let (c, a) = if gone {
                expired.push(name.clone());
                (0, 0)
            } else {
                let healthy = r.devices.values().filter(|d| d.health == HEALTHY).count();
                (r.devices.len(), healthy)
            };
            cap.insert(
                name.clone(),
                Quantity::from_value(c as i64, Format::DecimalSI),
            );
            alloc.insert(
                name.clone(),
                Quantity::from_value(a as i64, Format::DecimalSI),
            );
        }
        for name in expired {
            st.resources.remove(&name);
        }
        (cap, alloc)
    }

    fn healthy(&self, resource: &str) -> Option<BTreeSet<String>> {
        self.lock().resources.get(resource).map(|r| {
            r.devices
                .values()
                .filter(|d| d.health == HEALTHY)
                .map(|d| d.id.clone())
                .collect()
        })
    }

    fn is_device_resource(&self, resource: &str) -> bool {
        self.lock().resources.contains_key(resource)
    }

    /// Admits a pod: every container's device requests are allocated (kept if
    /// already allocated, as after an agent restart). A pod asking for more
    /// devices than are allocatable fails as upstream's predicate admission
    /// (`OutOf<resource>`); a failed allocation as `UnexpectedAdmissionError`.
    /// Returns (reason, message) of a rejection.
    pub async fn admit(&self, pod: &Pod) -> Option<(String, String)> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let spec = pod.spec.as_ref()?;
        let containers: Vec<&Container> = spec
            .init_containers
            .iter()
            .flatten()
            .chain(spec.containers.iter())
            .collect();
        let _guard = self.admit_lock.lock().await;
        let (_, allocatable) = self.capacity();
        // Predicate admission first: the pod's total against allocatable minus
        // what other pods hold (upstream's GeneralPredicates over extended resources).
        let mut totals: BTreeMap<String, i64> = BTreeMap::new();
        for c in &containers {
            for (r, n) in device_requests(c) {
                if self.is_device_resource(&r) {
                    *totals.entry(r).or_default() += n;
                }
            }
        }
        for (r, requested) in &totals {
            let (used, held) = {
                let st = self.lock();
                let held = st.in_use(r, Some(&uid)).len() as i64;
                (st.in_use(r, None).len() as i64 - held, held)
            };
            let capacity = allocatable.get(r).map(Quantity::value).unwrap_or(0);
            if held < *requested && used + requested > capacity {
                self.lock().release_reservations(&uid);
                return Some((
                    format!("OutOf{r}"),
                    format!(
                        "Node didn't have enough resource: {r}, requested: {requested}, used: {used}, capacity: {capacity}"
                    ),
                ));
            }
        }
        for c in &containers {
            for (r, n) in device_requests(c) {
                if !self.is_device_resource(&r) {
                    continue;
                }
                if let Err(e) = self.allocate(&uid, &c.name, &r, n as usize).await {
                    self.lock().release_reservations(&uid);
                    return Some((
                        UNEXPECTED_ADMISSION_ERROR.into(),
                        format!("Allocate failed due to {e}, which is unexpected"),
                    ));
                }
            }
        }
        None
    }

    /// Allocates `needed` devices of `resource` to one container.
    async fn allocate(
        &self,
        uid: &str,
        container: &str,
        resource: &str,
        needed: usize,
    ) -> Result<(), String> {
        if let Some(a) = self.lock().pod_devices.get(uid, container, resource)
            && a.device_ids.len() == needed
        {
            return Ok(());
        }
        let key = (uid.to_string(), container.to_string());
        let reserved = self
            .lock()
            .reserved
            .get(&key)
            .and_then(|m| m.get(resource))
            .cloned();
        let healthy = self.healthy(resource).unwrap_or_default();
        let mut ids = match &reserved {
            Some(ids) => ids.clone(),
            None => {
                let in_use = self.lock().in_use(resource, None);
                pod_devices::pick(resource, needed, &healthy, &in_use)?
            }
        };
        let (socket, options) = {
            let st = self.lock();
            let r = st.resources.get(resource);
            (
                r.and_then(|r| r.socket.clone())
                    .filter(|_| r.is_some_and(|r| r.stopped_at.is_none())),
                r.map(|r| r.options).unwrap_or_default(),
            )
        };
        let socket = socket.ok_or_else(|| {
            format!("no healthy devices present; cannot allocate unhealthy devices {resource}")
        })?;
        let plugin = endpoint::PluginClient::connect(socket, self.call_timeout)?;
        // A NUMA-aligned reservation is kept; the plugin chooses otherwise.
        if options.get_preferred_allocation_available && reserved.is_none() {
            let in_use = self.lock().in_use(resource, None);
            let available: Vec<String> = healthy.difference(&in_use).cloned().collect();
            match plugin.preferred(available.clone(), needed).await {
                Ok(pref) => {
                    let valid = pref.len() == needed
                        && pref.iter().all(|d| available.contains(d))
                        && pref.iter().collect::<BTreeSet<_>>().len() == needed;
                    if valid {
                        ids = pref;
                    } else {
                        warn!(%resource, ?pref, "ignoring an invalid preferred allocation");
                    }
                }
                Err(e) => warn!(%resource, error = %e, "GetPreferredAllocation failed"),
            }
        }
        let response = plugin.allocate(ids.clone()).await?;
        info!(pod = uid, container, %resource, devices = ?ids, "devices allocated");
        let mut st = self.lock();
        if let Some(m) = st.reserved.get_mut(&key) {
            m.remove(resource);
            if m.is_empty() {
                st.reserved.remove(&key);
            }
        }
        st.pod_devices.insert(
            uid,
            container,
            resource,
            Allocation {
                device_ids: ids,
                response,
            },
        );
        drop(st);
        self.checkpoint();
        Ok(())
    }

    /// Before a container starts: `PreStartContainer` for the plugins that ask
    /// for it, then the allocations applied to the container's config.
    pub async fn prepare_container(
        &self,
        uid: &str,
        container: &str,
        cfg: &mut ContainerConfig,
    ) -> Result<(), String> {
        let allocs: Vec<(String, Allocation, Option<PathBuf>, bool)> = {
            let st = self.lock();
            st.pod_devices
                .container(uid, container)
                .into_iter()
                .map(|(r, a)| {
                    let res = st.resources.get(r);
                    (
                        r.to_string(),
                        a.clone(),
                        res.and_then(|x| x.socket.clone()),
                        res.is_some_and(|x| x.options.pre_start_required),
                    )
                })
                .collect()
        };
        for (resource, a, socket, pre_start) in allocs {
            if pre_start {
                let socket = socket
                    .ok_or_else(|| format!("device plugin of {resource} is not registered"))?;
                endpoint::PluginClient::connect(socket, self.call_timeout)?
                    .pre_start(a.device_ids.clone())
                    .await?;
            }
            apply_response(cfg, &a.response);
        }
        Ok(())
    }

    /// Frees a pod's devices (it terminated or was removed).
    pub fn remove_pod(&self, uid: &str) {
        let removed = {
            let mut st = self.lock();
            st.release_reservations(uid);
            st.pod_devices.remove_pod(uid)
        };
        if removed {
            self.checkpoint();
        }
    }

    /// Drops the devices the Topology Manager reserved for a pod it then
    /// rejected.
    pub fn release_reservations(&self, uid: &str) {
        self.lock().release_reservations(uid);
    }

    /// The devices a container holds, per resource.
    pub fn container_devices(&self, uid: &str, container: &str) -> BTreeMap<String, Vec<String>> {
        self.lock()
            .pod_devices
            .container(uid, container)
            .into_iter()
            .map(|(r, a)| (r.to_string(), a.device_ids.clone()))
            .collect()
    }

    fn checkpoint(&self) {
        let cp = {
            let st = self.lock();
            let registered = st
                .resources
                .iter()
                .map(|(r, s)| (r.clone(), s.devices.keys().cloned().collect()))
                .collect();
            let numa = |r: &str, id: &str| -> Vec<i64> {
                st.resources
                    .get(r)
                    .and_then(|x| x.devices.get(id))
                    .and_then(|d| d.topology.as_ref())
                    .map(|t| t.nodes.iter().map(|n| n.id).collect())
                    .unwrap_or_default()
            };
            st.pod_devices.to_checkpoint(&registered, &numa)
        };
        if let Err(e) = pod_devices::write_checkpoint(&self.dir, &cp) {
            warn!(error = %e, "writing the device manager checkpoint");
        }
    }
}

/// A container's requests of extended resources: limits (which extended
/// resources must set; requests equal them), else requests.
pub fn device_requests(c: &Container) -> Vec<(String, i64)> {
    let Some(res) = &c.resources else {
        return Vec::new();
    };
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    for map in [&res.requests, &res.limits].into_iter().flatten() {
        for (k, v) in map {
            if !berth_api::quota::is_extended_resource(k) {
                continue;
            }
            if let Ok(q) = Quantity::parse(&v.0) {
                out.insert(k.clone(), q.value());
            }
        }
    }
    out.into_iter().filter(|(_, n)| *n > 0).collect()
}

/// Applies a plugin's Allocate answer to a container (upstream's
/// `GetDeviceRunContainerOptions`): envs, mounts, device nodes, annotations and
/// CDI device names.
pub fn apply_response(cfg: &mut ContainerConfig, r: &pb::ContainerAllocateResponse) {
    for (k, v) in &r.envs {
        cfg.envs.retain(|(name, _)| name != k);
        cfg.envs.push((k.clone(), v.clone()));
    }
    for m in &r.mounts {
        cfg.mounts.retain(|x| x.container_path != m.container_path);
        cfg.mounts.push(crate::runtime::Mount {
            container_path: m.container_path.clone(),
            host_path: m.host_path.clone(),
            readonly: m.read_only,
        });
    }
    for d in &r.devices {
        cfg.devices.push(crate::runtime::DeviceNode {
            container_path: d.container_path.clone(),
            host_path: d.host_path.clone(),
            permissions: if d.permissions.is_empty() {
                "rwm".into()
            } else {
                d.permissions.clone()
            },
        });
    }
    for (k, v) in &r.annotations {
        cfg.annotations.insert(k.clone(), v.clone());
    }
    for c in &r.cdi_devices {
        cfg.cdi_devices.push(c.name.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    fn pod(uid: &str, n: u32) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": uid, "uid": uid},
            "spec": {"containers": [{"name": "c", "resources": {
                "limits": {"example.com/fake": n.to_string(), "cpu": "1"}}}]}
        }))
        .expect("pod")
    }

    #[test]
    fn device_requests_table() {
        // (limits, expected extended requests)
        let cases: &[(serde_json::Value, &[(&str, i64)])] = &[
            (serde_json::json!({"cpu": "2", "memory": "1Gi"}), &[]),
            (
                serde_json::json!({"example.com/a": "2"}),
                &[("example.com/a", 2)],
            ),
            (serde_json::json!({"example.com/a": "0"}), &[]),
            (
                serde_json::json!({"kubernetes.io/x": "1", "nvidia.com/gpu": "1"}),
                &[("nvidia.com/gpu", 1)],
            ),
        ];
        for (limits, want) in cases {
            let c: Container = serde_json::from_value(
                serde_json::json!({"name": "c", "resources": {"limits": limits}}),
            )
            .expect("container");
            let want: Vec<(String, i64)> = want.iter().map(|(r, n)| (r.to_string(), *n)).collect();
            assert_eq!(device_requests(&c), want, "{limits}");
        }
    }

    #[test]
    fn apply_response_sets_envs_mounts_devices_annotations_cdi() {
        let mut cfg = ContainerConfig {
            envs: vec![("A".into(), "old".into())],
            ..Default::default()
        };
        let r = pb::ContainerAllocateResponse {
            envs: [("A".to_string(), "new".to_string())].into(),
            mounts: vec![pb::Mount {
                container_path: "/m".into(),
                host_path: "/h".into(),
                read_only: true,
            }],
            devices: vec![pb::DeviceSpec {
                container_path: "/dev/x".into(),
                host_path: "/dev/y".into(),
                permissions: String::new(),
            }],
            annotations: [("k".to_string(), "v".to_string())].into(),
            cdi_devices: vec![pb::CdiDevice {
                name: "vendor.com/gpu=0".into(),
            }],
        };
        apply_response(&mut cfg, &r);
        assert_eq!(cfg.envs, vec![("A".to_string(), "new".to_string())]);
        assert_eq!(cfg.mounts.len(), 1);
        assert!(cfg.mounts[0].readonly);
        assert_eq!(cfg.devices[0].permissions, "rwm");
        assert_eq!(cfg.devices[0].host_path, "/dev/y");
        assert_eq!(cfg.annotations.get("k").map(String::as_str), Some("v"));
        assert_eq!(cfg.cdi_devices, vec!["vendor.com/gpu=0".to_string()]);
    }

    struct Fake {
        d0_healthy: Arc<AtomicBool>,
    }

    impl plugin::DeviceSource for Fake {
        fn resource_name(&self) -> String {
            "example.com/fake".into()
        }
        fn devices(&self) -> Vec<pb::Device> {
            let h = |ok: bool| if ok { HEALTHY } else { UNHEALTHY }.to_string();
            vec![
                pb::Device {
                    id: "d0".into(),
                    health: h(self.d0_healthy.load(Ordering::SeqCst)),
                    topology: None,
                },
                pb::Device {
                    id: "d1".into(),
                    health: h(true),
                    topology: None,
                },
            ]
        }
        fn allocate(&self, ids: &[String]) -> Result<pb::ContainerAllocateResponse, String> {
            Ok(pb::ContainerAllocateResponse {
                envs: [("FAKE".to_string(), ids.join(","))].into(),
                ..Default::default()
            })
        }
    }

    async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
        for _ in 0..100 {
            if f() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("timed out waiting for {what}");
    }

    fn allocatable(dm: &DeviceManager) -> i64 {
        dm.capacity()
            .1
            .get("example.com/fake")
            .map_or(-1, Quantity::value)
    }

    /// The whole path over real unix sockets: registration, ListAndWatch and
    /// health, admission and its failures, the container's answer, and an agent
    /// restart that keeps the allocation and gets the plugin back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn manager_with_a_plugin_over_sockets() {
        let dir = std::env::temp_dir().join(format!("berth-dm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let dm = DeviceManager::start(dir.clone(), vec![0])
            .await
            .expect("start");
        let d0 = Arc::new(AtomicBool::new(true));
        let source = Fake {
            d0_healthy: d0.clone(),
        };
        let plugin = tokio::spawn(plugin::run(dir.clone(), "fake.sock".into(), source));
        wait_for("2 allocatable", || allocatable(&dm) == 2).await;

        // An unhealthy device leaves allocatable, not capacity.
        d0.store(false, Ordering::SeqCst);
        wait_for("1 allocatable", || allocatable(&dm) == 1).await;
        assert_eq!(dm.capacity().0["example.com/fake"].value(), 2);
        d0.store(true, Ordering::SeqCst);
        wait_for("2 allocatable again", || allocatable(&dm) == 2).await;

        assert_eq!(
            dm.admit(&pod("big", 3)).await,
            Some((
                "OutOfexample.com/fake".to_string(),
                "Node didn't have enough resource: example.com/fake, requested: 3, used: 0, capacity: 2"
                    .to_string()
            ))
        );
        assert_eq!(dm.admit(&pod("a", 1)).await, None);
        let held = dm.container_devices("a", "c");
        assert_eq!(held["example.com/fake"].len(), 1);
        // Admission again (each sync) keeps the same devices.
        assert_eq!(dm.admit(&pod("a", 1)).await, None);
        assert_eq!(dm.container_devices("a", "c"), held);
        let mut cfg = ContainerConfig::default();
        dm.prepare_container("a", "c", &mut cfg)
            .await
            .expect("prepare");
        assert_eq!(
            cfg.envs,
            vec![("FAKE".to_string(), held["example.com/fake"].join(","))]
        );
        assert_eq!(
            dm.admit(&pod("b", 2)).await,
            Some((
                "OutOfexample.com/fake".to_string(),
                "Node didn't have enough resource: example.com/fake, requested: 2, used: 1, capacity: 2"
                    .to_string()
            ))
        );

        // Agent restart: a new manager on the same directory reads the
        // checkpoint, re-creates kubelet.sock, and the plugin registers again.
        drop(dm);
        let dm = DeviceManager::start(dir.clone(), vec![0])
            .await
            .expect("restart");
        assert_eq!(dm.container_devices("a", "c"), held);
        assert_eq!(
            allocatable(&dm),
            0,
            "devices unhealthy until the plugin is back"
        );
        wait_for("plugin re-registered", || allocatable(&dm) == 2).await;
        assert_eq!(dm.admit(&pod("c", 1)).await, None);
        let other = &dm.container_devices("c", "c")["example.com/fake"];
        assert_ne!(
            other, &held["example.com/fake"],
            "a held device was given again"
        );
        dm.remove_pod("a");
        dm.remove_pod("c");
        assert!(dm.container_devices("a", "c").is_empty());

        plugin.abort();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
