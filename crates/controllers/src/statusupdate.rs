//! Status writes as upstream's controllers make them: an update of the
//! status subresource (`UpdateStatus`), which is what their
//! `system:controller:*` roles allow (`update` on `<resource>/status`, not
//! `patch`). A controller states the change as a merge patch (RFC 7386) of
//! the object it read; the update carries that object's resourceVersion, so
//! a conflict means the object changed since: [`update`] merges the change
//! into the object read again and retries, [`update_once`] lets the caller
//! decide (the Job controller's counters must not be written from a stale
//! read).

use kube::api::PostParams;
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// How often a conflicting update is retried on a fresh read.
const RETRIES: usize = 3;

/// `current` with `patch` merged in.
pub fn merged<K: Serialize + DeserializeOwned>(
    current: &K,
    patch: &serde_json::Value,
) -> Result<K, serde_json::Error> {
    let mut doc = serde_json::to_value(current)?;
    json_patch::merge(&mut doc, patch);
    serde_json::from_value(doc)
}

/// Updates the status of `current` to `current` + `patch`; on a conflict,
/// of the object read again (through a list, see `lister`).
pub async fn update<K>(
    api: &Api<K>,
    current: &K,
    patch: &serde_json::Value,
) -> Result<K, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let name = current.meta().name.clone().unwrap_or_default();
    let mut base = current.clone();
    let mut attempt = 1;
    loop {
        match update_once(api, &base, patch).await {
            Err(kube::Error::Api(e)) if e.code == 409 && attempt < RETRIES => {
                attempt += 1;
                match crate::lister::get(api, &name).await? {
                    Some(fresh) => base = fresh,
                    None => return Err(kube::Error::Api(e)),
                }
            }
            other => return other,
        }
    }
}

/// Updates the status of `current` to `current` + `patch`, guarded by its
/// resourceVersion (409 when it changed meanwhile).
pub async fn update_once<K>(
    api: &Api<K>,
    current: &K,
    patch: &serde_json::Value,
) -> Result<K, kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let name = current.meta().name.clone().unwrap_or_default();
    let obj = merged(current, patch).map_err(kube::Error::SerdeError)?;
    api.replace_status(&name, &PostParams::default(), &obj)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use serde_json::json;

    #[test]
    fn the_change_is_merged_into_what_was_read() {
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": "r", "resourceVersion": "7"},
            "spec": {"replicas": 3, "selector": {}},
            "status": {"replicas": 1, "readyReplicas": 1,
                "conditions": [{"type": "ReplicaFailure", "status": "True"}]}
        }))
        .unwrap();
        let out = merged(
            &rs,
            &json!({"status": {"replicas": 3, "readyReplicas": null, "availableReplicas": 2}}),
        )
        .unwrap();
        let st = out.status.unwrap();
        assert_eq!(st.replicas, 3);
        assert_eq!(st.ready_replicas, None, "null removes");
        assert_eq!(st.available_replicas, Some(2));
        assert_eq!(
            st.conditions.unwrap().len(),
            1,
            "what the patch leaves out stays"
        );
        assert_eq!(out.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(out.spec.unwrap().replicas, Some(3));
    }
}
