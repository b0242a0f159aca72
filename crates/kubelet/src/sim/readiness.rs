//! Simulated readiness: `sim.berth.dev/ready: "false"` on a running simulated
//! pod makes its readiness probe "fail" — the Ready and ContainersReady
//! conditions and every container's `ready` go false, as a kubelet reports a
//! failing probe; removing the annotation (or any other value) makes it ready
//! again. Lets tests drive endpoints without real probes.

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{SecondsFormat, Utc};
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use serde_json::{Value, json};
use tracing::warn;

/// The annotation; `"false"` = not ready.
pub const READY_ANNOTATION: &str = "sim.berth.dev/ready";

/// Whether the pod should be ready by its annotation.
fn wants_ready(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(READY_ANNOTATION))
        .is_none_or(|v| v != "false")
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// The status patch that flips readiness, or `None` when nothing is to change
/// (not running, being deleted, or already as wanted).
pub fn readiness_patch(pod: &Pod, at: &str) -> Option<Value> {
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() != Some("Running") || pod.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let ready = wants_ready(pod);
    if ready == is_ready(pod) {
        return None;
    }
    let unready: Vec<String> = pod
        .spec
        .as_ref()
        .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    let message = format!("containers with unready status: [{}]", unready.join(" "));
    let mut st = serde_json::to_value(status).ok()?;
    if let Some(conds) = st.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in conds.iter_mut() {
            if matches!(c["type"].as_str(), Some("Ready" | "ContainersReady")) {
                c["status"] = json!(if ready { "True" } else { "False" });
                c["lastTransitionTime"] = json!(at);
                if let Some(o) = c.as_object_mut() {
                    if ready {
                        o.remove("reason");
                        o.remove("message");
                    } else {
                        o.insert("reason".into(), json!("ContainersNotReady"));
                        o.insert("message".into(), json!(message));
                    }
                }
            }
        }
    }
    if let Some(cs) = st
        .get_mut("containerStatuses")
        .and_then(Value::as_array_mut)
    {
        for c in cs.iter_mut() {
            c["ready"] = json!(ready);
        }
    }
    Some(
        json!({"status": {"conditions": st["conditions"], "containerStatuses": st["containerStatuses"]}}),
    )
}

/// Watches pods on the simulated nodes and applies their readiness annotation.
pub async fn run(client: Client, nodes: HashSet<String>) {
    let nodes = Arc::new(nodes);
    let api: Api<Pod> = Api::all(client.clone());
    // Only bound pods can be on a simulated node.
    let bound = berth_runtime::reflect::informer_config().fields("spec.nodeName!=");
    let stream = watcher::watcher(api, bound)
        .default_backoff()
        .applied_objects();
    let mut stream = std::pin::pin!(stream);
    loop {
        let pod = match stream.try_next().await {
            Ok(Some(p)) => p,
            Ok(None) => return,
            Err(e) => {
                warn!(error = %e, "simulated readiness: pod watch failed");
                continue;
            }
        };
        let on_ours = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_some_and(|n| nodes.contains(n));
        if !on_ours {
            continue;
        }
        let at = Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true);
        let Some(patch) = readiness_patch(&pod, &at) else {
            continue;
        };
        let pods: Api<Pod> = Api::namespaced(
            client.clone(),
            pod.metadata.namespace.as_deref().unwrap_or("default"),
        );
        let name = pod.metadata.name.clone().unwrap_or_default();
        if let Err(e) = pods
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            && !matches!(&e, kube::Error::Api(r) if r.code == 404)
        {
            warn!(pod = %name, error = %e, "simulated readiness update failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(annotation: Option<&str>, ready: bool, phase: &str) -> Pod {
        let mut meta = json!({"name": "p"});
        if let Some(a) = annotation {
            meta["annotations"] = json!({READY_ANNOTATION: a});
        }
        let s = if ready { "True" } else { "False" };
        serde_json::from_value(json!({
            "metadata": meta,
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": phase, "conditions": [
                {"type": "Ready", "status": s}, {"type": "ContainersReady", "status": s},
                {"type": "PodScheduled", "status": "True"}],
                "containerStatuses": [{"name": "c", "ready": ready, "restartCount": 0, "image": "i", "imageID": ""}]}
        }))
        .unwrap()
    }

    #[test]
    fn annotation_drives_readiness() {
        let at = "2025-01-01T00:00:00Z";
        // Ready pod told to be unready.
        let p = readiness_patch(&pod(Some("false"), true, "Running"), at).unwrap();
        let conds = p["status"]["conditions"].as_array().unwrap();
        assert_eq!(conds[0]["status"], "False");
        assert_eq!(conds[0]["reason"], "ContainersNotReady");
        assert_eq!(conds[0]["message"], "containers with unready status: [c]");
        assert_eq!(conds[2]["status"], "True");
        assert_eq!(p["status"]["containerStatuses"][0]["ready"], false);
        // Unready pod whose annotation went away.
        let p = readiness_patch(&pod(None, false, "Running"), at).unwrap();
        assert_eq!(p["status"]["conditions"][1]["status"], "True");
        assert!(p["status"]["conditions"][1].get("reason").is_none());
        // Nothing to do.
        assert!(readiness_patch(&pod(Some("false"), false, "Running"), at).is_none());
        assert!(readiness_patch(&pod(None, true, "Running"), at).is_none());
        assert!(readiness_patch(&pod(Some("false"), true, "Pending"), at).is_none());
    }
}
