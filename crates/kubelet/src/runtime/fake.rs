//! An in-memory [`Runtime`] for unit tests: sandboxes and containers are records,
//! images a set, and tests script exits and exec results.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{
    ContainerConfig, ContainerState, ContainerStats, ContainerStatus, ExecResult, Filter, FsUsage,
    ImageInfo, LinuxResources, Runtime, RuntimeError, RuntimeResult, SandboxConfig, SandboxState,
    SandboxStats, SandboxStatus, StreamUrl,
};

/// A scripted exec answer: a result, or a timeout.
pub type ExecAnswer = RuntimeResult<ExecResult>;

#[derive(Default)]
struct State {
    next_id: u64,
    images: BTreeSet<String>,
    /// The `USER` of images that have one (uid, or a name).
    image_users: HashMap<String, (Option<i64>, String)>,
    /// Sizes of images that have one (bytes), and the pinned ones.
    image_sizes: HashMap<String, u64>,
    pinned_images: BTreeSet<String>,
    sandboxes: BTreeMap<String, SandboxStatus>,
    containers: BTreeMap<String, ContainerStatus>,
    /// The config each container was created from, by id.
    configs: BTreeMap<String, ContainerConfig>,
    /// The config each sandbox was run with, by id.
    sandbox_configs: BTreeMap<String, SandboxConfig>,
    /// Calls in order, e.g. "run_sandbox ns/name", "start_container <id>".
    calls: Vec<String>,
    /// Exec answers per container name (consumed in order; the last one repeats).
    exec: HashMap<String, Vec<ExecAnswer>>,
    /// Container names whose start fails with this message (RunContainerError).
    start_fails: HashMap<String, String>,
    /// The IP given to the next sandboxes (10.42.0.<n>).
    next_ip: u8,
    /// Stats tests set, by container / sandbox id; reported while the
    /// container or sandbox exists.
    container_stats: BTreeMap<String, ContainerStats>,
    sandbox_stats: BTreeMap<String, SandboxStats>,
    image_fs: Vec<FsUsage>,
    /// Every stats call fails with this while set.
    stats_error: Option<RuntimeError>,
}

impl State {
    fn image_info(&self, name: &str) -> ImageInfo {
        ImageInfo {
            id: format!("sha256:{name}"),
            repo_tags: vec![name.to_string()],
            repo_digests: vec![],
            size: self.image_sizes.get(name).copied().unwrap_or(0),
            uid: None,
            username: String::new(),
            pinned: self.pinned_images.contains(name),
        }
    }
}

/// The fake runtime. Cheap to share behind an `Arc`.
#[derive(Default)]
pub struct FakeRuntime {
    state: Mutex<State>,
}

impl FakeRuntime {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panicking test thread poisons the lock; the data is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes an image present.
    pub fn add_image(&self, image: &str) {
        self.lock().images.insert(image.to_string());
    }

    /// Makes an image present with a size; `pinned` as the runtime's pin.
    pub fn add_image_sized(&self, image: &str, size: u64, pinned: bool) {
        let mut s = self.lock();
        s.images.insert(image.to_string());
        s.image_sizes.insert(image.to_string(), size);
        if pinned {
            s.pinned_images.insert(image.to_string());
        }
    }

    /// The images present, by name.
    pub fn images(&self) -> Vec<String> {
        self.lock().images.iter().cloned().collect()
    }

    /// Gives a present image a `USER`: a uid, or a name (as containerd reports it).
    pub fn set_image_user(&self, image: &str, uid: Option<i64>, username: &str) {
        self.lock()
            .image_users
            .insert(image.to_string(), (uid, username.to_string()));
    }

    /// Scripts the answers of exec_sync in containers named `container`.
    pub fn script_exec(&self, container: &str, answers: Vec<ExecAnswer>) {
        self.lock().exec.insert(container.to_string(), answers);
    }

    /// Makes starting containers named `container` fail with `message`.
    pub fn fail_start(&self, container: &str, message: &str) {
        self.lock()
            .start_fails
            .insert(container.to_string(), message.to_string());
    }

    /// Ends a running container as its process would: exit code and reason.
    pub fn exit_container(&self, id: &str, exit_code: i32, reason: &str) {
        let mut s = self.lock();
        if let Some(c) = s.containers.get_mut(id) {
            c.state = ContainerState::Exited;
            c.exit_code = exit_code;
            c.reason = reason.to_string();
            c.finished_at = Some(Utc::now());
        }
    }

    /// The calls made so far, in order.
    pub fn calls(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    /// Containers (any state) named `name`, oldest first.
    pub fn containers_named(&self, name: &str) -> Vec<ContainerStatus> {
        self.lock()
            .containers
            .values()
            .filter(|c| c.name == name)
            .cloned()
            .collect()
    }

    /// The config sandbox `id` was run with.
    pub fn sandbox_config(&self, id: &str) -> Option<SandboxConfig> {
        self.lock().sandbox_configs.get(id).cloned()
    }

    /// The config container `id` was created from.
    pub fn container_config(&self, id: &str) -> Option<ContainerConfig> {
        self.lock().configs.get(id).cloned()
    }

    pub fn sandbox_count(&self) -> usize {
        self.lock().sandboxes.len()
    }

    /// Sets what `list_container_stats` reports for container `stats.id`.
    pub fn set_container_stats(&self, stats: ContainerStats) {
        self.lock().container_stats.insert(stats.id.clone(), stats);
    }

    /// Sets what `list_sandbox_stats` reports for sandbox `stats.id`.
    pub fn set_sandbox_stats(&self, stats: SandboxStats) {
        self.lock().sandbox_stats.insert(stats.id.clone(), stats);
    }

    /// Sets what `image_fs_info` reports.
    pub fn set_image_fs(&self, fs: Vec<FsUsage>) {
        self.lock().image_fs = fs;
    }

    /// Makes every stats call fail with `error` (None: succeed again).
    pub fn fail_stats(&self, error: Option<RuntimeError>) {
        self.lock().stats_error = error;
    }

    /// Sets the creation time of a sandbox or container (tests want fixed times).
    pub fn set_created_at(&self, id: &str, at: DateTime<Utc>) {
        let mut s = self.lock();
        if let Some(sb) = s.sandboxes.get_mut(id) {
            sb.created_at = Some(at);
        }
        if let Some(c) = s.containers.get_mut(id) {
            c.created_at = Some(at);
        }
    }
}

fn matches(labels: &BTreeMap<String, String>, filter: &Filter) -> bool {
    filter
        .labels
        .iter()
        .all(|(k, v)| labels.get(k).is_some_and(|l| l == v))
}

#[async_trait::async_trait]
impl Runtime for FakeRuntime {
    async fn version(&self) -> RuntimeResult<(String, String)> {
        Ok(("fake".into(), "0.0.0".into()))
    }

    async fn run_sandbox(&self, config: &SandboxConfig) -> RuntimeResult<String> {
        let mut s = self.lock();
        s.next_id += 1;
        s.next_ip = s.next_ip.wrapping_add(1).max(2);
        let id = format!("sandbox-{}", s.next_id);
        let ip = format!("10.42.0.{}", s.next_ip);
        s.calls
            .push(format!("run_sandbox {}/{}", config.namespace, config.name));
        s.sandbox_configs.insert(id.clone(), config.clone());
        s.sandboxes.insert(
            id.clone(),
            SandboxStatus {
                id: id.clone(),
                name: config.name.clone(),
                namespace: config.namespace.clone(),
                uid: config.uid.clone(),
                attempt: config.attempt,
                state: SandboxState::Ready,
                created_at: Some(Utc::now()),
                ips: if config.host_network {
                    vec![]
                } else {
                    vec![ip]
                },
                labels: config.labels.clone(),
            },
        );
        Ok(id)
    }

    async fn stop_sandbox(&self, id: &str) -> RuntimeResult<()> {
        let mut s = self.lock();
        s.calls.push(format!("stop_sandbox {id}"));
        let now = Utc::now();
        for c in s.containers.values_mut() {
            if c.sandbox_id == id && c.state == ContainerState::Running {
                c.state = ContainerState::Exited;
                c.exit_code = 137;
                c.reason = "Error".into();
                c.finished_at = Some(now);
            }
        }
        if let Some(sb) = s.sandboxes.get_mut(id) {
            sb.state = SandboxState::NotReady;
        }
        Ok(())
    }

    async fn remove_sandbox(&self, id: &str) -> RuntimeResult<()> {
        let mut s = self.lock();
        s.calls.push(format!("remove_sandbox {id}"));
        s.sandboxes.remove(id);
        s.containers.retain(|_, c| c.sandbox_id != id);
        Ok(())
    }

    async fn sandbox_status(&self, id: &str) -> RuntimeResult<SandboxStatus> {
        self.lock()
            .sandboxes
            .get(id)
            .cloned()
            .ok_or_else(|| RuntimeError::NotFound(id.to_string()))
    }

    async fn list_sandboxes(&self, filter: &Filter) -> RuntimeResult<Vec<SandboxStatus>> {
        Ok(self
            .lock()
            .sandboxes
            .values()
            .filter(|s| filter.sandbox_id.as_ref().is_none_or(|id| *id == s.id))
            .filter(|s| matches(&s.labels, filter))
            .cloned()
            .collect())
    }

    async fn create_container(
        &self,
        sandbox_id: &str,
        config: &ContainerConfig,
        _sandbox: &SandboxConfig,
    ) -> RuntimeResult<String> {
        let mut s = self.lock();
        if !s.sandboxes.contains_key(sandbox_id) {
            return Err(RuntimeError::NotFound(sandbox_id.to_string()));
        }
        // By name or by the reference a pull or image status gave.
        let image = config
            .image
            .strip_prefix("sha256:")
            .unwrap_or(&config.image);
        if !s.images.contains(image) {
            return Err(RuntimeError::Other(format!(
                "image {:?} not present",
                config.image
            )));
        }
        let image_ref = format!("sha256:{image}");
        s.next_id += 1;
        let id = format!("container-{}", s.next_id);
        s.calls.push(format!("create_container {}", config.name));
        s.configs.insert(id.clone(), config.clone());
        s.containers.insert(
            id.clone(),
            ContainerStatus {
                id: id.clone(),
                sandbox_id: sandbox_id.to_string(),
                name: config.name.clone(),
                attempt: config.attempt,
                state: ContainerState::Created,
                created_at: Some(Utc::now()),
                started_at: None,
                finished_at: None,
                exit_code: 0,
                reason: String::new(),
                message: String::new(),
                image: config.image.clone(),
                image_ref,
                labels: config.labels.clone(),
                annotations: config.annotations.clone(),
                log_path: config.log_path.clone(),
            },
        );
        Ok(id)
    }

    async fn start_container(&self, id: &str) -> RuntimeResult<()> {
        let mut s = self.lock();
        s.calls.push(format!("start_container {id}"));
        let name = match s.containers.get(id) {
            Some(c) => c.name.clone(),
            None => return Err(RuntimeError::NotFound(id.to_string())),
        };
        let fail = s.start_fails.get(&name).cloned();
        let Some(c) = s.containers.get_mut(id) else {
            return Err(RuntimeError::NotFound(id.to_string()));
        };
        let now = Utc::now();
        if let Some(msg) = fail {
            c.state = ContainerState::Exited;
            c.exit_code = 128;
            c.reason = "StartError".into();
            c.message = msg.clone();
            c.finished_at = Some(now);
            return Err(RuntimeError::Other(msg));
        }
        c.state = ContainerState::Running;
        c.started_at = Some(now);
        Ok(())
    }

    async fn stop_container(&self, id: &str, grace: Duration) -> RuntimeResult<()> {
        let mut s = self.lock();
        s.calls
            .push(format!("stop_container {id} {}s", grace.as_secs()));
        if let Some(c) = s.containers.get_mut(id)
            && c.state == ContainerState::Running
        {
            c.state = ContainerState::Exited;
            c.exit_code = 137;
            c.reason = "Error".into();
            c.finished_at = Some(Utc::now());
        }
        Ok(())
    }

    async fn update_container_resources(
        &self,
        id: &str,
        resources: &LinuxResources,
    ) -> RuntimeResult<()> {
        let mut s = self.lock();
        s.calls.push(format!(
            "update_container_resources {id} cpuset={}",
            resources.cpuset_cpus
        ));
        if !s.containers.contains_key(id) {
            return Err(RuntimeError::NotFound(id.to_string()));
        }
        if let Some(cfg) = s.configs.get_mut(id)
            && !resources.cpuset_cpus.is_empty()
        {
            cfg.resources.cpuset_cpus = resources.cpuset_cpus.clone();
        }
        Ok(())
    }

    async fn remove_container(&self, id: &str) -> RuntimeResult<()> {
        let mut s = self.lock();
        s.calls.push(format!("remove_container {id}"));
        s.containers.remove(id);
        Ok(())
    }

    async fn container_status(&self, id: &str) -> RuntimeResult<ContainerStatus> {
        self.lock()
            .containers
            .get(id)
            .cloned()
            .ok_or_else(|| RuntimeError::NotFound(id.to_string()))
    }

    async fn list_containers(&self, filter: &Filter) -> RuntimeResult<Vec<ContainerStatus>> {
        Ok(self
            .lock()
            .containers
            .values()
            .filter(|c| {
                filter
                    .sandbox_id
                    .as_ref()
                    .is_none_or(|id| *id == c.sandbox_id)
            })
            .filter(|c| matches(&c.labels, filter))
            .cloned()
            .collect())
    }

    async fn exec_sync(
        &self,
        container_id: &str,
        cmd: &[String],
        _timeout: Duration,
    ) -> RuntimeResult<ExecResult> {
        let mut s = self.lock();
        s.calls
            .push(format!("exec_sync {container_id} {}", cmd.join(" ")));
        let name = match s.containers.get(container_id) {
            Some(c) if c.state == ContainerState::Running => c.name.clone(),
            Some(_) => return Err(RuntimeError::Other("container is not running".into())),
            None => return Err(RuntimeError::NotFound(container_id.to_string())),
        };
        match s.exec.get_mut(&name) {
            Some(answers) if answers.len() > 1 => answers.remove(0),
            Some(answers) if answers.len() == 1 => answers[0].clone(),
            _ => Ok(ExecResult::default()),
        }
    }

    async fn image_status(&self, image: &str) -> RuntimeResult<Option<ImageInfo>> {
        let s = self.lock();
        // Pulls return `sha256:<name>`: the reference finds its image too.
        let name = image.strip_prefix("sha256:").unwrap_or(image);
        Ok(s.images.get(name).map(|i| {
            let (uid, username) = s.image_users.get(i).cloned().unwrap_or_default();
            let mut info = s.image_info(i);
            (info.uid, info.username) = (uid, username);
            info
        }))
    }

    async fn pull_image(&self, image: &str) -> RuntimeResult<String> {
        let mut s = self.lock();
        s.calls.push(format!("pull_image {image}"));
        if s.images.contains(image) {
            Ok(format!("sha256:{image}"))
        } else {
            Err(RuntimeError::ImageNotFound(format!(
                "failed to resolve reference {image:?}: not found"
            )))
        }
    }

    async fn list_images(&self) -> RuntimeResult<Vec<ImageInfo>> {
        let s = self.lock();
        Ok(s.images.iter().map(|i| s.image_info(i)).collect())
    }

    async fn remove_image(&self, image: &str) -> RuntimeResult<()> {
        let mut s = self.lock();
        s.calls.push(format!("remove_image {image}"));
        // By name or by the id the image list gives (`sha256:<name>`).
        let name = image.strip_prefix("sha256:").unwrap_or(image);
        s.images.remove(name);
        Ok(())
    }

    async fn exec(
        &self,
        container_id: &str,
        _cmd: &[String],
        _tty: bool,
        _stdin: bool,
    ) -> RuntimeResult<StreamUrl> {
        Ok(StreamUrl(format!("http://fake/exec/{container_id}")))
    }

    async fn attach(
        &self,
        container_id: &str,
        _tty: bool,
        _stdin: bool,
    ) -> RuntimeResult<StreamUrl> {
        Ok(StreamUrl(format!("http://fake/attach/{container_id}")))
    }

    async fn port_forward(&self, sandbox_id: &str, _ports: &[i32]) -> RuntimeResult<StreamUrl> {
        Ok(StreamUrl(format!("http://fake/portforward/{sandbox_id}")))
    }

    async fn list_container_stats(&self) -> RuntimeResult<Vec<ContainerStats>> {
        let s = self.lock();
        if let Some(e) = &s.stats_error {
            return Err(e.clone());
        }
        Ok(s.container_stats
            .values()
            .filter(|c| s.containers.contains_key(&c.id))
            .cloned()
            .collect())
    }

    async fn list_sandbox_stats(&self) -> RuntimeResult<Vec<SandboxStats>> {
        let s = self.lock();
        if let Some(e) = &s.stats_error {
            return Err(e.clone());
        }
        Ok(s.sandbox_stats
            .values()
            .filter(|sb| s.sandboxes.contains_key(&sb.id))
            .cloned()
            .collect())
    }

    async fn image_fs_info(&self) -> RuntimeResult<Vec<FsUsage>> {
        let s = self.lock();
        if let Some(e) = &s.stats_error {
            return Err(e.clone());
        }
        Ok(s.image_fs.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn pull_of_missing_image_is_typed_not_found() {
        let rt = FakeRuntime::new();
        rt.add_image("busybox:latest");
        assert!(rt.pull_image("busybox:latest").await.is_ok());
        assert!(matches!(
            rt.pull_image("nope:1").await,
            Err(RuntimeError::ImageNotFound(_))
        ));
    }

    #[tokio::test]
    async fn exec_answers_are_consumed_in_order_and_last_repeats() {
        let rt = FakeRuntime::new();
        rt.add_image("busybox:latest");
        let sb = rt.run_sandbox(&SandboxConfig::default()).await.unwrap();
        let cfg = ContainerConfig {
            name: "app".into(),
            image: "busybox:latest".into(),
            ..Default::default()
        };
        let id = rt
            .create_container(&sb, &cfg, &SandboxConfig::default())
            .await
            .unwrap();
        rt.start_container(&id).await.unwrap();
        rt.script_exec(
            "app",
            vec![
                Err(RuntimeError::Timeout(Duration::from_secs(1))),
                Ok(ExecResult {
                    exit_code: 3,
                    ..Default::default()
                }),
            ],
        );
        let t = Duration::from_secs(1);
        assert!(matches!(
            rt.exec_sync(&id, &[], t).await,
            Err(RuntimeError::Timeout(_))
        ));
        assert_eq!(rt.exec_sync(&id, &[], t).await.unwrap().exit_code, 3);
        assert_eq!(rt.exec_sync(&id, &[], t).await.unwrap().exit_code, 3);
        rt.exit_container(&id, 1, "Error");
        assert!(rt.exec_sync(&id, &[], t).await.is_err());
    }

    #[tokio::test]
    async fn removing_a_sandbox_removes_its_containers() {
        let rt = FakeRuntime::new();
        rt.add_image("i");
        let sb = rt.run_sandbox(&SandboxConfig::default()).await.unwrap();
        let cfg = ContainerConfig {
            name: "c".into(),
            image: "i".into(),
            ..Default::default()
        };
        rt.create_container(&sb, &cfg, &SandboxConfig::default())
            .await
            .unwrap();
        rt.stop_sandbox(&sb).await.unwrap();
        rt.remove_sandbox(&sb).await.unwrap();
        assert_eq!(rt.sandbox_count(), 0);
        assert!(
            rt.list_containers(&Filter::default())
                .await
                .unwrap()
                .is_empty()
        );
    }
}
