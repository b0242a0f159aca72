//! The volume controllers against a real Berth API server started in-process:
//! static binding, the provisioner hand-off, Lost and Released, and the
//! protection finalizers.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

async fn client(api: &berth_apiserver::LocalApiServer) -> Result<kube::Client> {
    Ok(kube::Client::try_from(kube::Config::new(
        format!("http://{}", api.http).parse()?,
    ))?)
}

/// Polls `f` until it returns Some, for up to 20 s.
async fn eventually<T, F, Fut>(what: &str, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    for _ in 0..200 {
        if let Some(t) = f().await? {
            return Ok(t);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("timed out waiting for {what}")
}

fn pv(name: &str, size: &str, extra: serde_json::Value) -> Result<PersistentVolume> {
    let mut v = json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                 "hostPath": {"path": format!("/data/{name}")}}
    });
    if let (Some(a), Some(b)) = (v.as_object_mut(), extra.as_object()) {
        for (k, val) in b {
            if let (Some(sa), Some(sb)) = (
                a.get_mut(k).and_then(|x| x.as_object_mut()),
                val.as_object(),
            ) {
                for (k2, v2) in sb {
                    sa.insert(k2.clone(), v2.clone());
                }
            } else {
                a.insert(k.clone(), val.clone());
            }
        }
    }
    Ok(serde_json::from_value(v)?)
}

fn pvc(name: &str, size: &str, class: Option<&str>) -> Result<PersistentVolumeClaim> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}},
                 "storageClassName": class}
    }))?)
}

async fn phase_of_claim(api: &Api<PersistentVolumeClaim>, name: &str) -> Result<Option<String>> {
    Ok(api
        .get_opt(name)
        .await?
        .and_then(|c| c.status)
        .and_then(|s| s.phase))
}

async fn phase_of_volume(api: &Api<PersistentVolume>, name: &str) -> Result<Option<String>> {
    Ok(api
        .get_opt(name)
        .await?
        .and_then(|c| c.status)
        .and_then(|s| s.phase))
}

async fn has_event(client: &kube::Client, name: &str, reason: &str) -> Result<Option<Event>> {
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    Ok(events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .find(|e| {
            e.involved_object.name.as_deref() == Some(name) && e.reason.as_deref() == Some(reason)
        }))
}

#[tokio::test]
async fn static_binding_provisioning_and_reclaim() -> Result<()> {
    let server = berth_apiserver::LocalApiServer::start("volume-binder").await?;
    let client = client(&server).await?;
    let controllers = tokio::spawn({
        let c = client.clone();
        async move {
            tokio::join!(
                berth_controllers::volume::persistentvolume::run(c.clone()),
                berth_controllers::volume::pvcprotection::run(c.clone()),
                berth_controllers::volume::pvprotection::run(c),
            );
        }
    });
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let pp = PostParams::default();

    // Static binding: the smallest volume that fits.
    pvs.create(&pp, &pv("big", "10Gi", json!({}))?).await?;
    pvs.create(&pp, &pv("small", "2Gi", json!({}))?).await?;
    eventually("volumes Available", || async {
        Ok(
            (phase_of_volume(&pvs, "small").await?.as_deref() == Some("Available")
                && phase_of_volume(&pvs, "big").await?.as_deref() == Some("Available"))
            .then_some(()),
        )
    })
    .await?;
    pvcs.create(&pp, &pvc("data", "1Gi", Some(""))?).await?;
    let claim = eventually("claim Bound", || async {
        Ok(pvcs
            .get_opt("data")
            .await?
            .filter(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")))
    })
    .await?;
    assert_eq!(
        claim.spec.as_ref().and_then(|s| s.volume_name.as_deref()),
        Some("small")
    );
    let ann = claim.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        ann.get("pv.kubernetes.io/bind-completed")
            .map(String::as_str),
        Some("yes")
    );
    assert_eq!(
        ann.get("pv.kubernetes.io/bound-by-controller")
            .map(String::as_str),
        Some("yes")
    );
    assert_eq!(
        claim
            .status
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage"))
            .map(|q| q.0.as_str()),
        Some("2Gi")
    );
    let small = eventually("volume Bound", || async {
        Ok(pvs
            .get_opt("small")
            .await?
            .filter(|v| v.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")))
    })
    .await?;
    let r = small.spec.and_then(|s| s.claim_ref).context("claimRef")?;
    assert_eq!(r.uid, claim.metadata.uid);
    // The protection controllers put their finalizers on both.
    eventually("finalizers", || async {
        let c = pvcs.get("data").await?;
        let v = pvs.get("small").await?;
        Ok((c
            .metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == "kubernetes.io/pvc-protection")
            && v.metadata
                .finalizers
                .unwrap_or_default()
                .iter()
                .any(|f| f == "kubernetes.io/pv-protection"))
        .then_some(()))
    })
    .await?;

    // A pod on a node holds the claim while it is being deleted.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    // The ServiceAccount admission plugin wants the namespace's default
    // account (the serviceaccount controller is not running here).
    let sa: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "default", "namespace": "default"}}))?;
    Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client.clone(), "default")
        .create(&pp, &sa)
        .await?;
    let pod: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "user", "namespace": "default"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}],
                 "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}
    }))?;
    pods.create(&pp, &pod).await?;
    pvcs.delete("data", &DeleteParams::default()).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let held = pvcs
        .get_opt("data")
        .await?
        .context("claim kept while in use")?;
    assert!(held.metadata.deletion_timestamp.is_some());
    // The pod goes: the claim goes, the Retain volume is Released and keeps
    // its pv-protection until then.
    pods.delete(
        "user",
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await?;
    eventually("claim gone", || async {
        Ok(pvcs.get_opt("data").await?.is_none().then_some(()))
    })
    .await?;
    eventually("volume Released", || async {
        Ok((phase_of_volume(&pvs, "small").await?.as_deref() == Some("Released")).then_some(()))
    })
    .await?;
    // A Released volume can be deleted: pv-protection lets it go.
    pvs.delete("small", &DeleteParams::default()).await?;
    eventually("volume gone", || async {
        Ok(pvs.get_opt("small").await?.is_none().then_some(()))
    })
    .await?;

    // Dynamic provisioning is the external provisioner's: the claim is
    // annotated and waits; the provisioner's PV is bound by the controller.
    let class: StorageClass = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "ext"}, "provisioner": "example.com/ext",
        "volumeBindingMode": "Immediate", "reclaimPolicy": "Delete"
    }))?;
    Api::<StorageClass>::all(client.clone())
        .create(&pp, &class)
        .await?;
    pvcs.create(&pp, &pvc("dyn", "1Gi", Some("ext"))?).await?;
    let dyn_claim = eventually("provisioner annotation", || async {
        Ok(pvcs.get_opt("dyn").await?.filter(|c| {
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("volume.kubernetes.io/storage-provisioner"))
                .map(String::as_str)
                == Some("example.com/ext")
        }))
    })
    .await?;
    eventually("ExternalProvisioning event", || {
        has_event(&client, "dyn", "ExternalProvisioning")
    })
    .await?;
    assert_eq!(
        phase_of_claim(&pvcs, "dyn").await?.as_deref(),
        Some("Pending")
    );
    let provisioned = pv(
        "pvc-dyn",
        "1Gi",
        json!({
            "metadata": {"name": "pvc-dyn", "annotations": {"pv.kubernetes.io/provisioned-by": "example.com/ext"}},
            "spec": {"storageClassName": "ext", "persistentVolumeReclaimPolicy": "Delete",
                     "claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": "default",
                                  "name": "dyn", "uid": dyn_claim.metadata.uid}}
        }),
    )?;
    pvs.create(&pp, &provisioned).await?;
    eventually("provisioned claim Bound", || async {
        Ok((phase_of_claim(&pvcs, "dyn").await?.as_deref() == Some("Bound")).then_some(()))
    })
    .await?;
    // Its volume is lost: the claim turns Lost. pv-protection keeps a Bound
    // volume, so its finalizer is taken off by hand, as an admin forcing
    // the deletion would.
    pvs.delete("pvc-dyn", &DeleteParams::default()).await?;
    eventually("volume gone", || async {
        match pvs.get_opt("pvc-dyn").await? {
            None => Ok(Some(())),
            Some(mut v) => {
                assert!(v.metadata.deletion_timestamp.is_some());
                v.metadata.finalizers = None;
                v.metadata.managed_fields = None;
                // A conflict with a controller's write is tried again.
                let _ = pvs.replace("pvc-dyn", &pp, &v).await;
                Ok(None)
            }
        }
    })
    .await?;
    eventually("claim Lost", || async {
        Ok((phase_of_claim(&pvcs, "dyn").await?.as_deref() == Some("Lost")).then_some(()))
    })
    .await?;
    eventually("ClaimLost event", || has_event(&client, "dyn", "ClaimLost")).await?;

    // No class and nothing to bind: FailedBinding.
    pvcs.create(&pp, &pvc("none", "100Gi", Some(""))?).await?;
    let e = eventually("FailedBinding event", || {
        has_event(&client, "none", "FailedBinding")
    })
    .await?;
    assert_eq!(
        e.message.as_deref(),
        Some("no persistent volumes available for this claim and no storage class is set")
    );

    // RetroactiveDefaultStorageClass: a claim created without any class gets
    // the default class once there is one (larger than the class-less
    // volume left, which it would otherwise bind).
    pvcs.create(&pp, &pvc("late", "50Gi", None)?).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let late = pvcs.get("late").await?;
    assert_eq!(late.spec.and_then(|s| s.storage_class_name), None);
    let default: StorageClass = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "std", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "example.com/std", "volumeBindingMode": "WaitForFirstConsumer"
    }))?;
    Api::<StorageClass>::all(client.clone())
        .create(&pp, &default)
        .await?;
    eventually("default class assigned", || async {
        Ok(pvcs
            .get("late")
            .await?
            .spec
            .and_then(|s| s.storage_class_name)
            .filter(|c| c == "std"))
    })
    .await?;
    // WaitForFirstConsumer: no provisioning before the scheduler picks a node.
    eventually("WaitForFirstConsumer event", || {
        has_event(&client, "late", "WaitForFirstConsumer")
    })
    .await?;
    let late = pvcs.get("late").await?;
    assert!(
        !late
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("volume.kubernetes.io/storage-provisioner")
    );
    controllers.abort();
    Ok(())
}
