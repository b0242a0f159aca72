//! Upstream's `controller_policy.go`: one `system:controller:<name>` ClusterRole
//! per controller, bound to the ServiceAccount `kube-system/<name>` the controller
//! manager runs it as. Only the controllers Berth runs are here.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule};

use super::builder::*;

const PREFIX: &str = "system:controller:";
const NAMESPACE: &str = "kube-system";

/// (controller name, rules), in upstream's order.
fn controllers() -> Vec<(&'static str, Vec<PolicyRule>)> {
    let star = &["*"];
    vec![
        (
            "clusterrole-aggregation-controller",
            vec![
                // Escalate: it writes rules it does not itself hold.
                rule(&["escalate", "get", "list", "watch", "update", "patch"])
                    .groups(&[RBAC_GROUP])
                    .resources(&["clusterroles"])
                    .build(),
            ],
        ),
        (
            "cronjob-controller",
            vec![
                rule(&["get", "list", "watch", "update"])
                    .groups(&[BATCH])
                    .resources(&["cronjobs"])
                    .build(),
                rule(&[
                    "get", "list", "watch", "create", "update", "delete", "patch",
                ])
                .groups(&[BATCH])
                .resources(&["jobs"])
                .build(),
                rule(&["update"])
                    .groups(&[BATCH])
                    .resources(&["cronjobs/status"])
                    .build(),
                rule(&["update"])
                    .groups(&[BATCH])
                    .resources(&["cronjobs/finalizers"])
                    .build(),
                rule(&["list", "watch", "delete"])
                    .groups(&[LEGACY])
                    .resources(&["pods"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "daemon-set-controller",
            vec![
                rule(READ)
                    .groups(&[EXTENSIONS, APPS])
                    .resources(&["daemonsets"])
                    .build(),
                rule(&["update"])
                    .groups(&[EXTENSIONS, APPS])
                    .resources(&["daemonsets/status"])
                    .build(),
                rule(&["update"])
                    .groups(&[EXTENSIONS, APPS])
                    .resources(&["daemonsets/finalizers"])
                    .build(),
                rule(&["list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["nodes"])
                    .build(),
                rule(&["list", "watch", "create", "delete", "patch"])
                    .groups(&[LEGACY])
                    .resources(&["pods"])
                    .build(),
                rule(&["create"])
                    .groups(&[LEGACY])
                    .resources(&["pods/binding"])
                    .build(),
                rule(&[
                    "get", "list", "watch", "create", "delete", "update", "patch",
                ])
                .groups(&[APPS])
                .resources(&["controllerrevisions"])
                .build(),
                events_rule(),
            ],
        ),
        (
            "deployment-controller",
            vec![
                rule(&["get", "list", "watch", "update"])
                    .groups(&[EXTENSIONS, APPS])
                    .resources(&["deployments"])
                    .build(),
                rule(&["update"])
                    .groups(&[EXTENSIONS, APPS])
                    .resources(&["deployments/status"])
                    .build(),
                rule(&["update"])
                    .groups(&[EXTENSIONS, APPS])
                    .resources(&["deployments/finalizers"])
                    .build(),
                rule(&[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ])
                .groups(&[EXTENSIONS, APPS])
                .resources(&["replicasets"])
                .build(),
                // Update for relabelling pods when adopting them.
                rule(&["get", "list", "watch", "update"])
                    .groups(&[LEGACY])
                    .resources(&["pods"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "disruption-controller",
            vec![
                rule(READ)
                    .groups(&[EXTENSIONS, APPS])
                    .resources(&["deployments"])
                    .build(),
                rule(READ)
                    .groups(&[EXTENSIONS, APPS])
                    .resources(&["replicasets"])
                    .build(),
                rule(READ)
                    .groups(&[LEGACY])
                    .resources(&["replicationcontrollers"])
                    .build(),
                rule(READ)
                    .groups(&[POLICY])
                    .resources(&["poddisruptionbudgets"])
                    .build(),
                rule(READ)
                    .groups(&[APPS])
                    .resources(&["statefulsets"])
                    .build(),
                rule(&["update"])
                    .groups(&[POLICY])
                    .resources(&["poddisruptionbudgets/status"])
                    .build(),
                rule(&["patch", "update"])
                    .groups(&[LEGACY])
                    .resources(&["pods/status"])
                    .build(),
                // Any workload's scale, for the expected pod count.
                rule(&["get"]).groups(star).resources(&["*/scale"]).build(),
                events_rule(),
            ],
        ),
        (
            "endpoint-controller",
            vec![
                rule(READ)
                    .groups(&[LEGACY])
                    .resources(&["services", "pods"])
                    .build(),
                rule(&["get", "list", "watch", "create", "update", "delete"])
                    .groups(&[LEGACY])
                    .resources(&["endpoints"])
                    .build(),
                // Endpoints may point at addresses users may not set themselves.
                rule(&["create"])
                    .groups(&[LEGACY])
                    .resources(&["endpoints/restricted"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "endpointslice-controller",
            vec![
                rule(READ)
                    .groups(&[LEGACY])
                    .resources(&["services", "pods", "nodes"])
                    .build(),
                // For setting owner references to services with blockOwnerDeletion.
                rule(&["update"])
                    .groups(&[LEGACY])
                    .resources(&["services/finalizers"])
                    .build(),
                rule(&["get", "list", "watch", "create", "update", "delete"])
                    .groups(&[DISCOVERY])
                    .resources(&["endpointslices"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "endpointslicemirroring-controller",
            vec![
                rule(READ)
                    .groups(&[LEGACY])
                    .resources(&["services", "endpoints"])
                    .build(),
                rule(&["update"])
                    .groups(&[LEGACY])
                    .resources(&["services/finalizers"])
                    .build(),
                rule(&["update"])
                    .groups(&[LEGACY])
                    .resources(&["endpoints/finalizers"])
                    .build(),
                rule(&["get", "list", "watch", "create", "update", "delete"])
                    .groups(&[DISCOVERY])
                    .resources(&["endpointslices"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "ephemeral-volume-controller",
            vec![
                rule(&["get", "list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["pods"])
                    .build(),
                rule(&["update"])
                    .groups(&[LEGACY])
                    .resources(&["pods/finalizers"])
                    .build(),
                rule(&["get", "list", "watch", "create"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumeclaims"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "generic-garbage-collector",
            vec![
                // Any object: it reads owners and deletes or orphans dependents.
                rule(&["get", "list", "watch", "patch", "update", "delete"])
                    .groups(star)
                    .resources(star)
                    .build(),
                events_rule(),
            ],
        ),
        (
            "horizontal-pod-autoscaler",
            vec![
                rule(&["get", "list", "watch"])
                    .groups(&[AUTOSCALING])
                    .resources(&["horizontalpodautoscalers"])
                    .build(),
                rule(&["update"])
                    .groups(&[AUTOSCALING])
                    .resources(&["horizontalpodautoscalers/status"])
                    .build(),
                rule(&["get", "update"])
                    .groups(star)
                    .resources(&["*/scale"])
                    .build(),
                rule(&["list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["pods"])
                    .build(),
                rule(&["list", "watch"])
                    .groups(&["metrics.k8s.io"])
                    .resources(&["pods"])
                    .build(),
                rule(&["get", "list", "watch"])
                    .groups(&["custom.metrics.k8s.io"])
                    .resources(star)
                    .build(),
                rule(&["get", "list", "watch"])
                    .groups(&["external.metrics.k8s.io"])
                    .resources(star)
                    .build(),
                events_rule(),
            ],
        ),
        (
            "job-controller",
            vec![
                rule(&["get", "list", "watch", "update", "patch"])
                    .groups(&[BATCH])
                    .resources(&["jobs"])
                    .build(),
                rule(&["update"])
                    .groups(&[BATCH])
                    .resources(&["jobs/status"])
                    .build(),
                rule(&["update"])
                    .groups(&[BATCH])
                    .resources(&["jobs/finalizers"])
                    .build(),
                rule(&["list", "watch", "create", "delete", "patch"])
                    .groups(&[LEGACY])
                    .resources(&["pods"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "namespace-controller",
            vec![
                rule(&["get", "list", "watch", "delete"])
                    .groups(&[LEGACY])
                    .resources(&["namespaces"])
                    .build(),
                rule(&["update"])
                    .groups(&[LEGACY])
                    .resources(&["namespaces/finalize", "namespaces/status"])
                    .build(),
                // Everything in a terminating namespace goes.
                rule(&["get", "list", "watch", "delete", "deletecollection"])
                    .groups(star)
                    .resources(star)
                    .build(),
            ],
        ),
        (
            "node-controller",
            vec![
                rule(&["get", "list", "watch", "update", "delete", "patch"])
                    .groups(&[LEGACY])
                    .resources(&["nodes"])
                    .build(),
                rule(&["patch", "update"])
                    .groups(&[LEGACY])
                    .resources(&["nodes/status"])
                    .build(),
                // Marking pods of unreachable nodes not ready.
                rule(&["patch", "update"])
                    .groups(&[LEGACY])
                    .resources(&["pods/status"])
                    .build(),
                rule(&["get", "list", "watch", "delete"])
                    .groups(&[LEGACY])
                    .resources(&["pods"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "persistent-volume-binder",
            vec![
                rule(&["get", "list", "watch", "update", "create", "delete"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumes"])
                    .build(),
                rule(&["update"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumes/status"])
                    .build(),
                rule(&["get", "list", "watch", "update"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumeclaims"])
                    .build(),
                rule(&["update"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumeclaims/status"])
                    .build(),
                rule(&["list", "watch", "get", "create", "delete"])
                    .groups(&[LEGACY])
                    .resources(&["pods"])
                    .build(),
                rule(&["get", "list", "watch"])
                    .groups(&[STORAGE])
                    .resources(&["storageclasses"])
                    .build(),
                rule(&["list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["nodes"])
                    .build(),
                events_rule(),
                rule(&["watch"])
                    .groups(&[LEGACY])
                    .resources(&["events"])
                    .build(),
            ],
        ),
        (
            "pod-garbage-collector",
            vec![
                rule(&["list", "watch", "delete"])
                    .groups(&[LEGACY])
                    .resources(&["pods"])
                    .build(),
                rule(&["get", "list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["nodes"])
                    .build(),
                rule(&["patch"])
                    .groups(&[LEGACY])
                    .resources(&["pods/status"])
                    .build(),
            ],
        ),
        (
            "pv-protection-controller",
            vec![
                rule(&["get", "list", "watch", "update"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumes"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "pvc-protection-controller",
            vec![
                rule(&["get", "list", "watch", "update"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumeclaims"])
                    .build(),
                rule(&["update"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumeclaims/status"])
                    .build(),
                rule(&["list", "watch", "get"])
                    .groups(&[LEGACY])
                    .resources(&["pods"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "replicaset-controller",
            vec![
                rule(&["get", "list", "watch", "update"])
                    .groups(&[APPS, EXTENSIONS])
                    .resources(&["replicasets"])
                    .build(),
                rule(&["update"])
                    .groups(&[APPS, EXTENSIONS])
                    .resources(&["replicasets/status"])
                    .build(),
                rule(&["update"])
                    .groups(&[APPS, EXTENSIONS])
                    .resources(&["replicasets/finalizers"])
                    .build(),
                rule(&["list", "watch", "patch", "create", "delete"])
                    .groups(&[LEGACY])
                    .resources(&["pods"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "replication-controller",
            vec![
                rule(&["get", "list", "watch", "update"])
                    .groups(&[LEGACY])
                    .resources(&["replicationcontrollers"])
                    .build(),
                rule(&["update"])
                    .groups(&[LEGACY])
                    .resources(&["replicationcontrollers/status"])
                    .build(),
                rule(&["update"])
                    .groups(&[LEGACY])
                    .resources(&["replicationcontrollers/finalizers"])
                    .build(),
                rule(&["list", "watch", "patch", "create", "delete"])
                    .groups(&[LEGACY])
                    .resources(&["pods"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "resourcequota-controller",
            vec![
                // Quota may count any resource.
                rule(&["list", "watch"])
                    .groups(star)
                    .resources(star)
                    .build(),
                rule(&["update"])
                    .groups(&[LEGACY])
                    .resources(&["resourcequotas/status"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "root-ca-cert-publisher",
            vec![
                rule(&["create", "update"])
                    .groups(&[LEGACY])
                    .resources(&["configmaps"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "service-account-controller",
            vec![
                rule(&["create"])
                    .groups(&[LEGACY])
                    .resources(&["serviceaccounts"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "statefulset-controller",
            vec![
                rule(&["list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["pods"])
                    .build(),
                rule(READ)
                    .groups(&[APPS])
                    .resources(&["statefulsets"])
                    .build(),
                rule(&["update"])
                    .groups(&[APPS])
                    .resources(&["statefulsets/status"])
                    .build(),
                rule(&["update"])
                    .groups(&[APPS])
                    .resources(&["statefulsets/finalizers"])
                    .build(),
                rule(&["get", "create", "delete", "update", "patch"])
                    .groups(&[LEGACY])
                    .resources(&["pods"])
                    .build(),
                rule(&[
                    "get", "create", "delete", "update", "patch", "list", "watch",
                ])
                .groups(&[APPS])
                .resources(&["controllerrevisions"])
                .build(),
                rule(&["get", "create", "list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumeclaims"])
                    .build(),
                // For the persistentVolumeClaimRetentionPolicy.
                rule(&["update", "delete"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumeclaims"])
                    .build(),
                // For setting owner references with blockOwnerDeletion.
                rule(&["update"])
                    .groups(&[LEGACY])
                    .resources(&["pods/finalizers"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "ttl-after-finished-controller",
            vec![
                rule(&["get", "list", "watch", "delete"])
                    .groups(&[BATCH])
                    .resources(&["jobs"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "ttl-controller",
            vec![
                rule(&["update", "patch", "list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["nodes"])
                    .build(),
                events_rule(),
            ],
        ),
        (
            "certificate-controller",
            vec![
                rule(&["get", "list", "watch", "delete"])
                    .groups(&[CERTIFICATES])
                    .resources(&["certificatesigningrequests"])
                    .build(),
                rule(&["update"])
                    .groups(&[CERTIFICATES])
                    .resources(&[
                        "certificatesigningrequests/status",
                        "certificatesigningrequests/approval",
                    ])
                    .build(),
                rule(&["approve"])
                    .groups(&[CERTIFICATES])
                    .resources(&["signers"])
                    .names(&["kubernetes.io/kube-apiserver-client-kubelet"])
                    .build(),
                rule(&["sign"])
                    .groups(&[CERTIFICATES])
                    .resources(&["signers"])
                    .names(&[
                        "kubernetes.io/legacy-unknown",
                        "kubernetes.io/kube-apiserver-client",
                        "kubernetes.io/kube-apiserver-client-kubelet",
                        "kubernetes.io/kubelet-serving",
                    ])
                    .build(),
                rule(&["create"])
                    .groups(&[AUTHORIZATION])
                    .resources(&["subjectaccessreviews"])
                    .build(),
                events_rule(),
            ],
        ),
    ]
}

pub(super) fn controller_roles() -> Vec<ClusterRole> {
    controllers()
        .into_iter()
        .map(|(name, rules)| cluster_role(&format!("{PREFIX}{name}"), rules))
        .collect()
}

pub(super) fn controller_role_bindings() -> Vec<ClusterRoleBinding> {
    controllers()
        .into_iter()
        .map(|(name, _)| {
            cluster_binding(
                &format!("{PREFIX}{name}"),
                vec![service_account(NAMESPACE, name)],
            )
        })
        .collect()
}
