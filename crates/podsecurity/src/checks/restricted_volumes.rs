//! `restrictedVolumes` (restricted; replaces `hostPathVolumes`): only
//! configMap, csi, downwardAPI, emptyDir, ephemeral, image,
//! persistentVolumeClaim, projected and secret volumes.

use serde_json::{Map, Value};

use super::{Check, Sorted, VersionedCheck, join_quote, pluralize, volumes};
use crate::api::Level;
use crate::registry::CheckResult;

pub fn check() -> Check {
    Check {
        id: "restrictedVolumes",
        level: Level::Restricted,
        versions: vec![VersionedCheck {
            minimum_version: 0,
            check_pod: v1_0,
            override_check_ids: &[super::host_path_volumes::ID],
        }],
    }
}

const ALLOWED: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

/// The restricted sources, in upstream's order of precedence.
const RESTRICTED: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "nfs",
    "iscsi",
    "glusterfs",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "fc",
    "azureFile",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "storageos",
];

fn set(v: &Map<String, Value>, k: &str) -> bool {
    v.get(k).is_some_and(|s| !s.is_null())
}

fn v1_0(_meta: &Value, spec: &Value) -> CheckResult {
    let mut bad = Vec::new();
    let mut types = Sorted::new();
    for (name, v) in volumes(spec) {
        if ALLOWED.iter().any(|k| set(v, k)) {
            continue;
        }
        bad.push(name);
        types.insert(
            RESTRICTED
                .iter()
                .find(|k| set(v, k))
                .copied()
                .unwrap_or("unknown"),
        );
    }
    if bad.is_empty() {
        return CheckResult::allowed();
    }
    CheckResult::forbidden(
        "restricted volume types",
        format!(
            "{} {} {} {} {}",
            pluralize("volume", "volumes", bad.len()),
            join_quote(&bad),
            pluralize("uses", "use", bad.len()),
            pluralize(
                "restricted volume type",
                "restricted volume types",
                types.len()
            ),
            join_quote(&types)
        ),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::testing::run;
    use super::*;

    #[test]
    fn table() {
        run(
            v1_0,
            &[
                (
                    "every allowed type",
                    json!({"spec": {"volumes": [
                        {"name": "a", "configMap": {"name": "x"}}, {"name": "b", "csi": {"driver": "d"}},
                        {"name": "c", "downwardAPI": {}}, {"name": "d", "emptyDir": {}},
                        {"name": "e", "ephemeral": {}}, {"name": "f", "image": {"reference": "r"}},
                        {"name": "g", "persistentVolumeClaim": {"claimName": "c"}},
                        {"name": "h", "projected": {}}, {"name": "i", "secret": {"secretName": "s"}}]}}),
                    None,
                ),
                (
                    "hostPath",
                    json!({"spec": {"volumes": [{"name": "a", "hostPath": {"path": "/"}}]}}),
                    Some((
                        "restricted volume types",
                        r#"volume "a" uses restricted volume type "hostPath""#,
                    )),
                ),
                (
                    "several, with an unknown source",
                    json!({"spec": {"volumes": [{"name": "a", "nfs": {"server": "s", "path": "/"}},
                        {"name": "b", "emptyDir": {}}, {"name": "c", "gitRepo": {"repository": "r"}},
                        {"name": "d", "mystery": {}}]}}),
                    Some((
                        "restricted volume types",
                        r#"volumes "a", "c", "d" use restricted volume types "gitRepo", "nfs", "unknown""#,
                    )),
                ),
            ],
        );
    }
}
