//! kube-rs (the client every Berth component uses) against a real `berth server`.

mod common;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_list_watch_create_patch_delete() {
    let s = tokio::task::spawn_blocking(|| common::Server::start("kube-rs"))
        .await
        .unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kc = Kubeconfig::read_from(&s.kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    let list = cms.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.clone().unwrap();
    let mut stream = cms
        // Only this ConfigMap: the root CA publisher may add kube-root-ca.crt meanwhile.
        .watch(
            &WatchParams::default()
                .fields("metadata.name=k1")
                .timeout(10),
            &rv,
        )
        .await
        .unwrap()
        .boxed();

    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "k1", "labels": {"a": "b"}}, "data": {"x": "1"}}),
    )
    .unwrap();
    let created = cms.create(&PostParams::default(), &cm).await.unwrap();
    assert!(created.metadata.uid.is_some());

    let patched = cms
        .patch(
            "k1",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"y": "2"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap().len(), 2);
    let jp: json_patch::Patch =
        serde_json::from_value(json!([{"op": "replace", "path": "/data/x", "value": "9"}]))
            .unwrap();
    let patched = cms
        .patch("k1", &PatchParams::default(), &Patch::<()>::Json(jp))
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["x"], "9");

    let listed = cms
        .list(&ListParams::default().labels("a=b"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);

    cms.delete("k1", &DeleteParams::default()).await.unwrap();

    let mut kinds = Vec::new();
    while let Some(ev) = stream.try_next().await.unwrap() {
        match ev {
            WatchEvent::Added(_) => kinds.push("ADDED"),
            WatchEvent::Modified(_) => kinds.push("MODIFIED"),
            WatchEvent::Deleted(_) => {
                kinds.push("DELETED");
                break;
            }
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("watch error: {e:?}"),
        }
    }
    assert_eq!(kinds, ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]);
    drop(s);
}
