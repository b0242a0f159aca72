//! `storage.k8s.io/v1` kinds.

use super::format::{arr, bool_at, get, name, opt_bool, opt_str, str_at};
use super::{AGE, Column, NAME, Printer, age, col};

pub(super) fn printer(kind: &str) -> Option<&'static Printer> {
    Some(match kind {
        "StorageClass" => &STORAGE_CLASS,
        "CSIDriver" => &CSI_DRIVER,
        "CSINode" => &CSI_NODE,
        "VolumeAttachment" => &VOLUME_ATTACHMENT,
        _ => return None,
    })
}

static STORAGE_CLASS: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Provisioner",
            "string",
            "provisioner indicates the type of the provisioner.",
        ),
        col(
            "ReclaimPolicy",
            "string",
            "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class.",
        ),
        col(
            "VolumeBindingMode",
            "string",
            "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.",
        ),
        col(
            "AllowVolumeExpansion",
            "string",
            "allowVolumeExpansion shows whether the storage class allow volume expand.",
        ),
        AGE,
    ],
    cells: |o, now| {
        // Upstream decorates the Name cell itself (storageutil.IsDefaultAnnotation).
        let is_default = [
            "storageclass.kubernetes.io/is-default-class",
            "storageclass.beta.kubernetes.io/is-default-class",
        ]
        .iter()
        .any(|a| opt_str(o, &["metadata", "annotations", a]) == Some("true"));
        let mut n = name(o);
        if is_default {
            n.push_str(" (default)");
        }
        vec![
            n.into(),
            str_at(o, &["provisioner"]).into(),
            opt_str(o, &["reclaimPolicy"]).unwrap_or("Delete").into(),
            opt_str(o, &["volumeBindingMode"])
                .unwrap_or("Immediate")
                .into(),
            bool_at(o, &["allowVolumeExpansion"]).into(),
            age(o, now).into(),
        ]
    },
};

static CSI_DRIVER: Printer = Printer {
    columns: &[
        NAME,
        col(
            "AttachRequired",
            "boolean",
            "attachRequired indicates this CSI volume driver requires an attach operation.",
        ),
        col(
            "PodInfoOnMount",
            "boolean",
            "podInfoOnMount indicates this CSI volume driver requires additional pod information (like podName, podUID, etc.) during mount operations.",
        ),
        col(
            "StorageCapacity",
            "boolean",
            "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity that the driver deployment will report.",
        ),
        col(
            "TokenRequests",
            "string",
            "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for to do necessary authentication.",
        ),
        col(
            "RequiresRepublish",
            "boolean",
            "requiresRepublish indicates the CSI driver wants `NodePublishVolume` being periodically called to reflect any possible change in the mounted volume.",
        ),
        col(
            "Modes",
            "string",
            "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports.",
        ),
        AGE,
    ],
    cells: |o, now| {
        let spec = |f: &str| get(o, &["spec", f]);
        let modes: Vec<&str> = arr(o, &["spec", "volumeLifecycleModes"])
            .iter()
            .map(|m| m.as_str().unwrap_or(""))
            .collect();
        let modes = if modes.is_empty() {
            "<none>".to_string()
        } else {
            modes.join(",")
        };
        // A nil list prints "<unset>", an empty one "".
        let token_requests = match spec("tokenRequests").filter(|v| !v.is_null()) {
            None => "<unset>".to_string(),
            Some(t) => t
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or(&[])
                .iter()
                .map(|t| str_at(t, &["audience"]))
                .collect::<Vec<_>>()
                .join(","),
        };
        vec![
            name(o).into(),
            opt_bool(o, &["spec", "attachRequired"])
                .unwrap_or(true)
                .into(),
            bool_at(o, &["spec", "podInfoOnMount"]).into(),
            bool_at(o, &["spec", "storageCapacity"]).into(),
            token_requests.into(),
            bool_at(o, &["spec", "requiresRepublish"]).into(),
            modes.into(),
            age(o, now).into(),
        ]
    },
};

static CSI_NODE: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Drivers",
            "integer",
            "Drivers indicates the number of CSI drivers registered on the node",
        ),
        AGE,
    ],
    cells: |o, now| {
        vec![
            name(o).into(),
            arr(o, &["spec", "drivers"]).len().into(),
            age(o, now).into(),
        ]
    },
};

static VOLUME_ATTACHMENT: Printer = Printer {
    columns: &[
        NAME,
        // Upstream marks this column with the name format too.
        Column {
            format: "name",
            ..col(
                "Attacher",
                "string",
                "attacher indicates the name of the volume driver that MUST handle this request.",
            )
        },
        col(
            "PV",
            "string",
            "persistentVolumeName represents the name of the persistent volume to attach.",
        ),
        col(
            "Node",
            "string",
            "nodeName represents the node that the volume should be attached to.",
        ),
        col(
            "Attached",
            "boolean",
            "attached indicates the volume is successfully attached.",
        ),
        AGE,
    ],
    cells: |o, now| {
        vec![
            name(o).into(),
            str_at(o, &["spec", "attacher"]).into(),
            str_at(o, &["spec", "source", "persistentVolumeName"]).into(),
            str_at(o, &["spec", "nodeName"]).into(),
            bool_at(o, &["status", "attached"]).into(),
            age(o, now).into(),
        ]
    },
};

#[cfg(test)]
mod tests {
    use super::super::testutil::{ago, now};
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn storage_class_default_decorates_name() {
        let sc = json!({"metadata": {"name": "standard", "creationTimestamp": ago(86400),
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "rancher.io/local-path", "volumeBindingMode": "WaitForFirstConsumer"});
        assert_eq!(
            Value::from((STORAGE_CLASS.cells)(&sc, now())),
            json!([
                "standard (default)",
                "rancher.io/local-path",
                "Delete",
                "WaitForFirstConsumer",
                false,
                "24h"
            ])
        );
        let sc = json!({"metadata": {"name": "fast", "annotations": {"storageclass.beta.kubernetes.io/is-default-class": "false"}},
            "provisioner": "p", "reclaimPolicy": "Retain", "allowVolumeExpansion": true});
        assert_eq!(
            Value::from((STORAGE_CLASS.cells)(&sc, now())),
            json!(["fast", "p", "Retain", "Immediate", true, "<unknown>"])
        );
    }

    #[test]
    fn csi_rows() {
        let d = json!({"metadata": {"name": "hostpath.csi.k8s.io"}, "spec": {"podInfoOnMount": true,
            "volumeLifecycleModes": ["Persistent", "Ephemeral"], "tokenRequests": [{"audience": "vault"}, {"audience": "gcp"}]}});
        assert_eq!(
            Value::from((CSI_DRIVER.cells)(&d, now())),
            json!([
                "hostpath.csi.k8s.io",
                true,
                true,
                false,
                "vault,gcp",
                false,
                "Persistent,Ephemeral",
                "<unknown>"
            ])
        );
        let d = json!({"metadata": {"name": "d"}, "spec": {"attachRequired": false, "tokenRequests": []}});
        assert_eq!(
            Value::from((CSI_DRIVER.cells)(&d, now())),
            json!(["d", false, false, false, "", false, "<none>", "<unknown>"])
        );
        let n = json!({"metadata": {"name": "node-1"}, "spec": {"drivers": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!((CSI_NODE.cells)(&n, now())[1], json!(2));
        let va = json!({"metadata": {"name": "csi-1"}, "spec": {"attacher": "a.csi", "nodeName": "node-1",
            "source": {"persistentVolumeName": "pv-1"}}, "status": {"attached": true}});
        assert_eq!(
            Value::from((VOLUME_ATTACHMENT.cells)(&va, now())),
            json!(["csi-1", "a.csi", "pv-1", "node-1", true, "<unknown>"])
        );
    }
}
