//! VolumeZone (upstream `plugins/volumezone`): a pod whose bound volumes
//! carry zone or region labels runs only on nodes of those zones/regions.

use std::collections::BTreeSet;

use berth_api::storage::claim_class;

use crate::framework::{
    Code, CycleState, Filter, NodeInfo, Plugin, PodInfo, PreFilter, Snapshot, Status,
};

pub const NAME: &str = "VolumeZone";
pub const ERR_REASON_CONFLICT: &str = "node(s) had no available volume zone";
const STATE_KEY: &str = "PreFilterVolumeZone";

const BETA_ZONE: &str = "failure-domain.beta.kubernetes.io/zone";
const BETA_REGION: &str = "failure-domain.beta.kubernetes.io/region";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";
/// The labels compared, in upstream's order.
const TOPOLOGY_LABELS: [&str; 4] = [BETA_ZONE, BETA_REGION, ZONE, REGION];

pub struct VolumeZone;

/// One volume's constraint: the node's `key` label must be one of `values`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PvTopology {
    key: &'static str,
    values: BTreeSet<String>,
}

/// A beta label also matches the node's GA label (upstream's translateToGALabel).
fn ga_label(key: &str) -> &str {
    match key {
        BETA_ZONE => ZONE,
        BETA_REGION => REGION,
        other => other,
    }
}

/// The topologies of the pod's bound volumes; unbound WaitForFirstConsumer
/// claims are skipped (VolumeBinding places them).
fn pod_pv_topologies(pod: &PodInfo, snap: &Snapshot) -> Result<Vec<PvTopology>, Status> {
    let ns = pod.namespace();
    let mut out = Vec::new();
    let claims = pod
        .pod
        .spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.persistent_volume_claim.as_ref());
    for c in claims {
        if c.claim_name.is_empty() {
            return Err(Status::unresolvable("PersistentVolumeClaim had no name"));
        }
        let Some(claim) = snap.storage.claim(ns, &c.claim_name) else {
            return Err(Status::unresolvable(format!(
                "persistentvolumeclaim {:?} not found",
                c.claim_name
            )));
        };
        let pv_name = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_deref())
            .unwrap_or_default();
        if pv_name.is_empty() {
            let class = claim_class(claim);
            if class.is_empty() {
                return Err(Status::unresolvable(
                    "PersistentVolumeClaim had no pv name and storageClass name",
                ));
            }
            let Some(sc) = snap.storage.class(&class) else {
                return Err(Status::unresolvable(format!(
                    "storageclass.storage.k8s.io {class:?} not found"
                )));
            };
            match sc.volume_binding_mode.as_deref() {
                None => {
                    return Err(Status::unresolvable(format!(
                        "VolumeBindingMode not set for StorageClass {class:?}"
                    )));
                }
                Some("WaitForFirstConsumer") => continue,
                Some(_) => return Err(Status::unresolvable("PersistentVolume had no name")),
            }
        }
        let Some(pv) = snap.storage.volume(pv_name) else {
            return Err(Status::unresolvable(format!(
                "persistentvolume {pv_name:?} not found"
            )));
        };
        let labels = pv.metadata.labels.as_ref();
        for key in TOPOLOGY_LABELS {
            if let Some(v) = labels.and_then(|l| l.get(key)) {
                // Upstream's LabelZonesToSet: a multi-zone volume lists
                // its zones joined by "__".
                let values = v.split("__").map(str::to_string).collect();
                out.push(PvTopology { key, values });
            }
        }
    }
    Ok(out)
}

impl Plugin for VolumeZone {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl PreFilter for VolumeZone {
    fn pre_filter(&self, state: &mut CycleState, pod: &PodInfo, snap: &Snapshot) -> Status {
        match pod_pv_topologies(pod, snap) {
            Err(s) => s,
            Ok(t) if t.is_empty() => Status::new(Code::Skip, Vec::new()),
            Ok(t) => {
                state.write(STATE_KEY, t);
                Status::success()
            }
        }
    }
}

impl Filter for VolumeZone {
    fn filter(&self, state: &CycleState, _pod: &PodInfo, node: &NodeInfo) -> Status {
        let Some(topologies) = state.read::<Vec<PvTopology>>(STATE_KEY) else {
            return Status::error(format!("cannot read {STATE_KEY:?} from cycleState"));
        };
        let labels = node.labels();
        // A node without any zone or region label takes any volume.
        if !TOPOLOGY_LABELS.iter().any(|k| labels.contains_key(*k)) {
            return Status::success();
        }
        for t in topologies {
            let v = labels.get(t.key).or_else(|| labels.get(ga_label(t.key)));
            if !v.is_some_and(|v| t.values.contains(v)) {
                return Status::unresolvable(ERR_REASON_CONFLICT);
            }
        }
        Status::success()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

    use super::*;
    use crate::framework::StorageSnapshot;
    use crate::plugins::testing::*;

    fn zoned(mut v: PersistentVolume, labels: &[(&str, &str)]) -> PersistentVolume {
        v.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        v
    }

    fn run(
        claims: Vec<PersistentVolumeClaim>,
        pv: PersistentVolume,
        node_labels: &[(&str, &str)],
    ) -> Status {
        let snap = Snapshot::new(vec![node_info(
            labeled(node("n1", &[]), node_labels),
            vec![],
        )])
        .with_storage(StorageSnapshot::of(
            claims,
            vec![pv],
            vec![
                storage_class("wffc", "example.com/csi", "WaitForFirstConsumer", &[]),
                storage_class("immediate", "example.com/csi", "Immediate", &[]),
                storage_class("nomode", "example.com/csi", "", &[]),
            ],
            vec![],
        ));
        let pi = PodInfo::new(with_claims(pod("p", &[]), &["c"]));
        let mut state = CycleState::default();
        let s = VolumeZone.pre_filter(&mut state, &pi, &snap);
        match s.code() {
            Code::Skip => Status::success(),
            Code::Success => VolumeZone.filter(&state, &pi, &snap.nodes[0]),
            _ => s,
        }
    }

    /// (case, claims, volume, node labels, unresolvable message or "")
    type Row<'a> = (
        &'a str,
        Vec<PersistentVolumeClaim>,
        PersistentVolume,
        &'a [(&'a str, &'a str)],
        &'a str,
    );

    #[test]
    fn table() {
        let bound = || vec![bound_pvc(pvc("c", "wffc", "1Gi"), "v")];
        let v = |labels: &[(&str, &str)]| zoned(pv("v", "wffc", "1Gi"), labels);
        let conflict = ERR_REASON_CONFLICT;
        // (case, claims, volume, node labels, unresolvable message or "")
        let cases: Vec<Row<'_>> = vec![
            ("same zone", bound(), v(&[(ZONE, "a")]), &[(ZONE, "a")], ""),
            (
                "other zone",
                bound(),
                v(&[(ZONE, "a")]),
                &[(ZONE, "b")],
                conflict,
            ),
            (
                "multi-zone volume",
                bound(),
                v(&[(ZONE, "a__b")]),
                &[(ZONE, "b")],
                "",
            ),
            (
                "beta volume label, GA node label",
                bound(),
                v(&[(BETA_ZONE, "a")]),
                &[(ZONE, "a")],
                "",
            ),
            (
                "region mismatch",
                bound(),
                v(&[(REGION, "r1")]),
                &[(REGION, "r2")],
                conflict,
            ),
            (
                "node without topology labels",
                bound(),
                v(&[(ZONE, "a")]),
                &[("x", "y")],
                "",
            ),
            (
                "node without the volume's label",
                bound(),
                v(&[(ZONE, "a")]),
                &[(REGION, "r1")],
                conflict,
            ),
            ("volume without labels", bound(), v(&[]), &[(ZONE, "a")], ""),
            (
                "unbound wait-for-first-consumer",
                vec![pvc("c", "wffc", "1Gi")],
                v(&[]),
                &[(ZONE, "a")],
                "",
            ),
            (
                "missing claim",
                vec![],
                v(&[]),
                &[],
                "persistentvolumeclaim \"c\" not found",
            ),
            (
                "unbound immediate",
                vec![pvc("c", "immediate", "1Gi")],
                v(&[]),
                &[],
                "PersistentVolume had no name",
            ),
            (
                "unbound without class",
                vec![pvc("c", "", "1Gi")],
                v(&[]),
                &[],
                "PersistentVolumeClaim had no pv name and storageClass name",
            ),
            (
                "unbound, class gone",
                vec![pvc("c", "gone", "1Gi")],
                v(&[]),
                &[],
                "storageclass.storage.k8s.io \"gone\" not found",
            ),
            (
                "unbound, class without mode",
                vec![pvc("c", "nomode", "1Gi")],
                v(&[]),
                &[],
                "VolumeBindingMode not set for StorageClass \"nomode\"",
            ),
            (
                "bound to a missing volume",
                vec![bound_pvc(pvc("c", "wffc", "1Gi"), "gone")],
                v(&[]),
                &[],
                "persistentvolume \"gone\" not found",
            ),
        ];
        for (case, claims, pv, node_labels, message) in cases {
            let s = run(claims, pv, node_labels);
            if message.is_empty() {
                assert!(s.is_success(), "{case}: {s}");
            } else {
                assert_eq!(s.code(), Code::UnschedulableAndUnresolvable, "{case}");
                assert_eq!(s.message(), message, "{case}");
            }
        }
    }
}
