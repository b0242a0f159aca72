//! The root CA certificate publisher (upstream's
//! `pkg/controller/certificates/rootcacertpublisher`): every active namespace
//! has a ConfigMap `kube-root-ca.crt` whose `ca.crt` is the cluster CA, so pods
//! can verify the API server (the ServiceAccount admission plugin mounts it in
//! every `kube-api-access-*` volume). It is created for new namespaces,
//! re-created when deleted, and restored when its data or description
//! annotation is changed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use tracing::{info, warn};

use crate::Error;
use crate::serviceaccount::is_active;

/// The ConfigMap every namespace gets.
pub const ROOT_CA_CERT_CONFIG_MAP_NAME: &str = "kube-root-ca.crt";
/// Its one key.
pub const CA_CRT_KEY: &str = "ca.crt";
pub const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver \
when using internal endpoints such as the internal service IP or kubernetes.default.svc. \
No other usage is guaranteed across distributions of Kubernetes clusters.";

struct Ctx {
    client: kube::Client,
    root_ca: String,
}

/// Runs the publisher with `root_ca` (PEM) until the process ends.
pub async fn run(client: kube::Client, root_ca: String) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let config_maps: Api<ConfigMap> = Api::all(client.clone());
    // Only the published ConfigMaps: every other ConfigMap is none of our business.
    let ours = berth_runtime::reflect::informer_config()
        .fields(&format!("metadata.name={ROOT_CA_CERT_CONFIG_MAP_NAME}"));
    Controller::new(namespaces, berth_runtime::reflect::informer_config())
        // A deleted or edited copy re-checks its namespace.
        .watches(config_maps, ours, |cm| {
            let ns = cm.metadata.namespace.as_deref()?;
            (cm.metadata.name.as_deref() == Some(ROOT_CA_CERT_CONFIG_MAP_NAME))
                .then(|| ObjectRef::new(ns))
        })
        .run(reconcile, error_policy, Arc::new(Ctx { client, root_ca }))
        .for_each(|_| async {})
        .await;
}

fn error_policy(_ns: Arc<Namespace>, err: &Error, _ctx: Arc<Ctx>) -> Action {
    warn!(error = %err, "publishing the root CA ConfigMap failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

/// What a namespace's `kube-root-ca.crt` needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Publish {
    Create(ConfigMap),
    /// The existing object with its data and description put back (its other
    /// fields, resourceVersion included, kept: the update is guarded by it).
    Update(ConfigMap),
    UpToDate,
}

fn desired_data(root_ca: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(CA_CRT_KEY.to_string(), root_ca.to_string())])
}

/// Upstream's `syncNamespace`: create it when missing; else its data must be
/// exactly `ca.crt` and it must carry a (non-empty) description, or both are
/// restored. Other annotations, labels and binaryData are left alone.
pub fn publish(existing: Option<&ConfigMap>, root_ca: &str) -> Publish {
    let data = desired_data(root_ca);
    let Some(cm) = existing else {
        return Publish::Create(ConfigMap {
            metadata: ObjectMeta {
                name: Some(ROOT_CA_CERT_CONFIG_MAP_NAME.into()),
                annotations: Some(BTreeMap::from([(
                    DESCRIPTION_ANNOTATION.to_string(),
                    DESCRIPTION.to_string(),
                )])),
                ..ObjectMeta::default()
            },
            data: Some(data),
            ..ConfigMap::default()
        });
    };
    let described = cm
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DESCRIPTION_ANNOTATION))
        .is_some_and(|d| !d.is_empty());
    if cm.data.as_ref() == Some(&data) && described {
        return Publish::UpToDate;
    }
    let mut cm = cm.clone();
    cm.data = Some(data);
    cm.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(DESCRIPTION_ANNOTATION.into(), DESCRIPTION.into());
    Publish::Update(cm)
}

async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    // A terminating namespace gets nothing new (the API server would refuse it).
    if !is_active(&ns) {
        return Ok(Action::await_change());
    }
    let Some(name) = ns.metadata.name.as_deref() else {
        return Ok(Action::await_change());
    };
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), name);
    let existing = crate::lister::get(&api, ROOT_CA_CERT_CONFIG_MAP_NAME).await?;
    match publish(existing.as_ref(), &ctx.root_ca) {
        Publish::UpToDate => {}
        Publish::Create(cm) => match api.create(&PostParams::default(), &cm).await {
            Ok(_) => info!(namespace = %name, "created ConfigMap {ROOT_CA_CERT_CONFIG_MAP_NAME}"),
            // The namespace is gone or began terminating meanwhile: nothing to
            // retry (upstream's NotFound / NamespaceTerminating). A conflict
            // is a race with another writer: the watch brings it back.
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 403 || e.code == 409 => {}
            Err(e) => return Err(e.into()),
        },
        Publish::Update(cm) => {
            api.replace(ROOT_CA_CERT_CONFIG_MAP_NAME, &PostParams::default(), &cm)
                .await?;
            info!(namespace = %name, "restored ConfigMap {ROOT_CA_CERT_CONFIG_MAP_NAME}");
        }
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CA: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

    fn cm(v: serde_json::Value) -> ConfigMap {
        serde_json::from_value(v).unwrap()
    }

    fn published() -> serde_json::Value {
        json!({
            "metadata": {"name": "kube-root-ca.crt", "namespace": "shop", "resourceVersion": "7",
                "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
            "data": {"ca.crt": CA}
        })
    }

    #[test]
    fn publish_decisions() {
        let mut edited = published();
        edited["data"]["ca.crt"] = json!("not a CA");
        let mut extra = published();
        extra["data"]["other"] = json!("x");
        let mut undescribed = published();
        undescribed["metadata"]["annotations"] = json!({"team": "a"});
        let mut own_words = published();
        own_words["metadata"]["annotations"][DESCRIPTION_ANNOTATION] = json!("ours");
        let mut labelled = published();
        labelled["metadata"]["labels"] = json!({"a": "b"});
        let mut no_data = published();
        no_data["data"] = serde_json::Value::Null;

        let restored = |mut v: serde_json::Value| {
            v["data"] = json!({"ca.crt": CA});
            v["metadata"]["annotations"][DESCRIPTION_ANNOTATION] = json!(DESCRIPTION);
            Publish::Update(cm(v))
        };
        // (existing, what to do)
        let cases = [
            (
                None,
                Publish::Create(cm(json!({
                    "metadata": {"name": "kube-root-ca.crt",
                        "annotations": {"kubernetes.io/description": DESCRIPTION}},
                    "data": {"ca.crt": CA}
                }))),
            ),
            (Some(published()), Publish::UpToDate),
            // Any description will do, as upstream; labels are not ours.
            (Some(own_words.clone()), Publish::UpToDate),
            (Some(labelled), Publish::UpToDate),
            (Some(edited.clone()), restored(edited)),
            (Some(extra.clone()), restored(extra)),
            // Other annotations stay; the description is added.
            (Some(undescribed.clone()), restored(undescribed)),
            (Some(no_data.clone()), restored(no_data)),
        ];
        for (existing, want) in cases {
            let existing = existing.map(cm);
            assert_eq!(publish(existing.as_ref(), CA), want, "{existing:?}");
        }
    }

    #[test]
    fn restore_keeps_the_resource_version() {
        let mut v = published();
        v["data"]["ca.crt"] = json!("x");
        let Publish::Update(cm) = publish(Some(&cm(v)), CA) else {
            panic!("expected an update");
        };
        assert_eq!(cm.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(cm.metadata.namespace.as_deref(), Some("shop"));
    }

    #[test]
    fn description_is_upstreams() {
        assert_eq!(
            DESCRIPTION,
            "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."
        );
    }
}
