//! The local-path provisioner's loop: watches claims and PersistentVolumes,
//! provisions the claims selected onto this node and deletes this node's
//! Released volumes, with the events upstream's external provisioner records.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use berth_runtime::events::{EventSource, EventType, Recorder};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::Notify;
use tracing::{info, warn};

use super::{owned_dir, volume_dir, volume_for, wants_deletion, wants_provisioning};

/// How often everything is looked at again without a watch event (failed
/// provisioning and deletion are retried this often).
const RESYNC: Duration = Duration::from_secs(10);

pub struct Config {
    pub node_name: String,
    /// `<data-dir>/storage`.
    pub storage_dir: PathBuf,
}

fn reflect<K>(api: Api<K>, notify: Arc<Notify>) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    tokio::spawn(async move {
        let stream = watcher::watcher(api, berth_runtime::reflect::informer_config())
            .default_backoff()
            .reflect(writer)
            .touched_objects();
        futures::pin_mut!(stream);
        while let Some(r) = stream.next().await {
            match r {
                Ok(_) => notify.notify_one(),
                Err(e) => warn!(error = %e, "local-path provisioner watch"),
            }
        }
    });
    store
}

pub async fn run(client: Client, cfg: Config) {
    let notify = Arc::new(Notify::new());
    let claims = reflect(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        notify.clone(),
    );
    let volumes = reflect(Api::<PersistentVolume>::all(client.clone()), notify.clone());
    let classes = reflect(Api::<StorageClass>::all(client.clone()), notify.clone());
    let recorder = Recorder::new(
        client.clone(),
        EventSource::new(
            berth_api::storage::LOCAL_PATH_PROVISIONER,
            cfg.node_name.clone(),
        ),
    );
    let p = Provisioner {
        client,
        cfg,
        recorder,
    };
    loop {
        for claim in claims.state() {
            if wants_provisioning(&claim, &p.cfg.node_name) {
                p.provision(&claim, &classes, &volumes).await;
            }
        }
        for pv in volumes.state() {
            if wants_deletion(&pv, &p.cfg.node_name) {
                p.delete(&pv).await;
            }
        }
        let _ = tokio::time::timeout(RESYNC, notify.notified()).await;
    }
}

struct Provisioner {
    client: Client,
    cfg: Config,
    recorder: Recorder,
}

impl Provisioner {
    async fn provision(
        &self,
        claim: &PersistentVolumeClaim,
        classes: &Store<StorageClass>,
        volumes: &Store<PersistentVolume>,
    ) {
        let name = super::volume_name(claim);
        if volumes
            .state()
            .iter()
            .any(|v| v.metadata.name.as_deref() == Some(name.as_str()))
        {
            return;
        }
        let key = format!(
            "{}/{}",
            claim.namespace().unwrap_or_default(),
            claim.name_any()
        );
        let class_name = berth_api::storage::claim_class(claim);
        let Some(class) = classes
            .state()
            .into_iter()
            .find(|c| c.metadata.name.as_deref() == Some(class_name.as_str()))
        else {
            self.recorder.event(
                claim,
                EventType::Warning,
                "ProvisioningFailed",
                format!("storageclass.storage.k8s.io {class_name:?} not found"),
            );
            return;
        };
        self.recorder.event(
            claim,
            EventType::Normal,
            "Provisioning",
            format!("External provisioner is provisioning volume for claim {key:?}"),
        );
        let dir = volume_dir(&self.cfg.storage_dir, claim);
        let failed = |e: String| {
            self.recorder.event(
                claim,
                EventType::Warning,
                "ProvisioningFailed",
                format!("failed to provision volume with StorageClass {class_name:?}: {e}"),
            );
        };
        let pv = match volume_for(claim, &class, &self.cfg.node_name, &dir) {
            Ok(pv) => pv,
            Err(e) => return failed(e),
        };
        if let Err(e) = make_dir(&dir) {
            return failed(format!("creating {}: {e}", dir.display()));
        }
        match Api::<PersistentVolume>::all(self.client.clone())
            .create(&PostParams::default(), &pv)
            .await
        {
            Ok(_) => {
                info!(claim = %key, volume = %name, dir = %dir.display(), "provisioned a local-path volume");
                self.recorder.event(
                    claim,
                    EventType::Normal,
                    "ProvisioningSucceeded",
                    format!("Successfully provisioned volume {name}"),
                );
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => {
                // Nothing refers to the directory yet: do not leave it behind.
                let _ = std::fs::remove_dir(&dir);
                failed(e.to_string());
            }
        }
    }

    async fn delete(&self, pv: &PersistentVolume) {
        let name = pv.name_any();
        let failed = |e: String| {
            self.recorder
                .event(pv, EventType::Warning, "VolumeFailedDelete", e);
        };
        let Some(dir) = owned_dir(pv, &self.cfg.storage_dir) else {
            return failed(format!(
                "local-path volume {name:?} is not under {}: not deleting its data",
                self.cfg.storage_dir.display()
            ));
        };
        // A Released volume's claim is gone, and pvc-protection kept the claim
        // until no pod used it; containers bind-mount the directory itself,
        // so nothing is mounted inside it.
        if dir.exists()
            && let Err(e) = std::fs::remove_dir_all(&dir)
        {
            return failed(format!("removing {}: {e}", dir.display()));
        }
        match Api::<PersistentVolume>::all(self.client.clone())
            .delete(&name, &DeleteParams::default())
            .await
        {
            Ok(_) => info!(volume = %name, "deleted a local-path volume"),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => failed(e.to_string()),
        }
    }
}

/// Mode 0777 regardless of the umask, as k3s's helper makes it (any user in
/// a pod may write).
fn make_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))
}
