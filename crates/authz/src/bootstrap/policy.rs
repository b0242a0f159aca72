//! Upstream's `policy.go`: the user-facing and component ClusterRoles and their
//! bindings.

use berth_api::user::{AUTHENTICATED, MASTERS, UNAUTHENTICATED};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule};

use super::builder::*;
use super::{AGGREGATE_TO_ADMIN, AGGREGATE_TO_EDIT, AGGREGATE_TO_VIEW};

/// Upstream's `NodeRules()`: what `system:node` grants (the Node authorizer and
/// NodeRestriction narrow it to a node's own objects).
fn node_rules() -> Vec<PolicyRule> {
    vec![
        // Non-mutating API access checks.
        rule(&["create"])
            .groups(&[AUTHENTICATION])
            .resources(&["tokenreviews"])
            .build(),
        rule(&["create"])
            .groups(&[AUTHORIZATION])
            .resources(&["subjectaccessreviews", "localsubjectaccessreviews"])
            .build(),
        // Service environment variables.
        rule(READ)
            .groups(&[LEGACY])
            .resources(&["services"])
            .build(),
        // Registering and reporting on its own Node.
        rule(&["create", "get", "list", "watch"])
            .groups(&[LEGACY])
            .resources(&["nodes"])
            .build(),
        rule(&["update", "patch"])
            .groups(&[LEGACY])
            .resources(&["nodes/status"])
            .build(),
        rule(&["update", "patch"])
            .groups(&[LEGACY])
            .resources(&["nodes"])
            .build(),
        rule(&["create", "update", "patch"])
            .groups(&[LEGACY])
            .resources(&["events"])
            .build(),
        rule(READ).groups(&[LEGACY]).resources(&["pods"]).build(),
        // Mirror pods.
        rule(&["create", "delete"])
            .groups(&[LEGACY])
            .resources(&["pods"])
            .build(),
        rule(&["update", "patch"])
            .groups(&[LEGACY])
            .resources(&["pods/status"])
            .build(),
        rule(&["create"])
            .groups(&[LEGACY])
            .resources(&["pods/eviction"])
            .build(),
        // Volumes, image pull secrets and env of the pods bound to it.
        rule(READ)
            .groups(&[LEGACY])
            .resources(&["secrets", "configmaps"])
            .build(),
        rule(&["get"])
            .groups(&[LEGACY])
            .resources(&["persistentvolumeclaims", "persistentvolumes"])
            .build(),
        rule(&["get"])
            .groups(&[LEGACY])
            .resources(&["endpoints"])
            .build(),
        // Rotating its own client certificate.
        rule(&["create", "get", "list", "watch"])
            .groups(&[CERTIFICATES])
            .resources(&["certificatesigningrequests"])
            .build(),
        rule(&["get", "create", "update", "patch", "delete"])
            .groups(&[COORDINATION])
            .resources(&["leases"])
            .build(),
        rule(&["get"])
            .groups(&[STORAGE])
            .resources(&["volumeattachments"])
            .build(),
        rule(&["create"])
            .groups(&[LEGACY])
            .resources(&["serviceaccounts/token"])
            .build(),
        rule(&["get", "update", "patch"])
            .groups(&[LEGACY])
            .resources(&["persistentvolumeclaims/status"])
            .build(),
        rule(READ)
            .groups(&[STORAGE])
            .resources(&["csidrivers"])
            .build(),
        rule(&["get", "create", "update", "patch", "delete"])
            .groups(&[STORAGE])
            .resources(&["csinodes"])
            .build(),
        rule(READ)
            .groups(&[NODE])
            .resources(&["runtimeclasses"])
            .build(),
    ]
}

fn approver(name: &str, signer: &str) -> ClusterRole {
    cluster_role(
        name,
        vec![
            rule(&["approve"])
                .groups(&[CERTIFICATES])
                .resources(&["signers"])
                .names(&[signer])
                .build(),
        ],
    )
}

pub(super) fn cluster_roles() -> Vec<ClusterRole> {
    vec![
        // A "root" role which can do absolutely anything.
        cluster_role(
            "cluster-admin",
            vec![
                rule(&["*"]).groups(&["*"]).resources(&["*"]).build(),
                rule(&["*"]).urls(&["*"]).build(),
            ],
        ),
        // Just enough to check the server is ready and discover API versions.
        cluster_role(
            "system:discovery",
            vec![
                rule(&["get"])
                    .urls(&[
                        "/livez",
                        "/readyz",
                        "/healthz",
                        "/version",
                        "/version/",
                        "/openapi",
                        "/openapi/*",
                        "/api",
                        "/api/*",
                        "/apis",
                        "/apis/*",
                    ])
                    .build(),
            ],
        ),
        // Health and metrics endpoints, for monitoring agents.
        cluster_role(
            "system:monitoring",
            vec![
                rule(&["get"])
                    .urls(&[
                        "/metrics",
                        "/metrics/slis",
                        "/livez",
                        "/readyz",
                        "/healthz",
                        "/livez/*",
                        "/readyz/*",
                        "/healthz/*",
                    ])
                    .build(),
            ],
        ),
        // What a "normal" user needs to learn about themselves.
        cluster_role(
            "system:basic-user",
            vec![
                rule(&["create"])
                    .groups(&[AUTHORIZATION])
                    .resources(&["selfsubjectaccessreviews", "selfsubjectrulesreviews"])
                    .build(),
                rule(&["create"])
                    .groups(&[AUTHENTICATION])
                    .resources(&["selfsubjectreviews"])
                    .build(),
            ],
        ),
        // Insensitive cluster information, readable without credentials.
        cluster_role(
            "system:public-info-viewer",
            vec![
                rule(&["get"])
                    .urls(&["/livez", "/readyz", "/healthz", "/version", "/version/"])
                    .build(),
            ],
        ),
        // Namespace admin: edit plus granting permissions to others.
        aggregated_cluster_role("admin", &[], AGGREGATE_TO_ADMIN),
        // Namespace editor: every user-level action, but not the system-owned
        // `/status` subresources or quota and limits.
        aggregated_cluster_role("edit", &[(AGGREGATE_TO_ADMIN, "true")], AGGREGATE_TO_EDIT),
        // Read-only access to non-escalating resources of a namespace.
        aggregated_cluster_role("view", &[(AGGREGATE_TO_EDIT, "true")], AGGREGATE_TO_VIEW),
        labelled_cluster_role(
            "system:aggregate-to-admin",
            &[(AGGREGATE_TO_ADMIN, "true")],
            vec![
                rule(&["create"])
                    .groups(&[AUTHORIZATION])
                    .resources(&["localsubjectaccessreviews"])
                    .build(),
                rule(READ_WRITE)
                    .groups(&[RBAC_GROUP])
                    .resources(&["roles", "rolebindings"])
                    .build(),
            ],
        ),
        labelled_cluster_role(
            "system:aggregate-to-edit",
            &[(AGGREGATE_TO_EDIT, "true")],
            aggregate_to_edit(),
        ),
        labelled_cluster_role(
            "system:aggregate-to-view",
            &[(AGGREGATE_TO_VIEW, "true")],
            aggregate_to_view(),
        ),
        cluster_role(
            "system:heapster",
            vec![
                rule(READ)
                    .groups(&[LEGACY])
                    .resources(&["events", "pods", "nodes", "namespaces"])
                    .build(),
                rule(READ)
                    .groups(&[EXTENSIONS])
                    .resources(&["deployments"])
                    .build(),
            ],
        ),
        cluster_role("system:node", node_rules()),
        // Not bound by default: where node-problem-detector runs varies.
        cluster_role(
            "system:node-problem-detector",
            vec![
                rule(&["get"])
                    .groups(&[LEGACY])
                    .resources(&["nodes"])
                    .build(),
                rule(&["patch"])
                    .groups(&[LEGACY])
                    .resources(&["nodes/status"])
                    .build(),
                events_rule(),
            ],
        ),
        // Full access to the kubelet API.
        cluster_role(
            "system:kubelet-api-admin",
            vec![
                rule(&["get", "list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["nodes"])
                    .build(),
                rule(&["proxy"])
                    .groups(&[LEGACY])
                    .resources(&["nodes"])
                    .build(),
                rule(&["*"])
                    .groups(&[LEGACY])
                    .resources(&["nodes/proxy", "nodes/metrics", "nodes/stats", "nodes/log"])
                    .build(),
            ],
        ),
        // A node's client certificate bootstrap.
        cluster_role(
            "system:node-bootstrapper",
            vec![
                rule(&["create", "get", "list", "watch"])
                    .groups(&[CERTIFICATES])
                    .resources(&["certificatesigningrequests"])
                    .build(),
            ],
        ),
        // Delegated authentication and authorization.
        cluster_role(
            "system:auth-delegator",
            vec![
                rule(&["create"])
                    .groups(&[AUTHENTICATION])
                    .resources(&["tokenreviews"])
                    .build(),
                rule(&["create"])
                    .groups(&[AUTHORIZATION])
                    .resources(&["subjectaccessreviews"])
                    .build(),
            ],
        ),
        // The aggregator must see whether the services it points to exist.
        cluster_role(
            "system:kube-aggregator",
            vec![
                rule(READ)
                    .groups(&[LEGACY])
                    .resources(&["services", "endpoints"])
                    .build(),
            ],
        ),
        cluster_role(
            "system:kube-controller-manager",
            kube_controller_manager_rules(),
        ),
        cluster_role(
            "system:kube-dns",
            vec![
                rule(&["list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["endpoints", "services"])
                    .build(),
            ],
        ),
        cluster_role(
            "system:persistent-volume-provisioner",
            vec![
                rule(&["get", "list", "watch", "create", "delete"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumes"])
                    .build(),
                // Update is needed to bind claims to volumes.
                rule(&["get", "list", "watch", "update"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumeclaims"])
                    .build(),
                rule(READ)
                    .groups(&[STORAGE])
                    .resources(&["storageclasses"])
                    .build(),
                rule(&["watch"])
                    .groups(&[LEGACY])
                    .resources(&["events"])
                    .build(),
                events_rule(),
            ],
        ),
        cluster_role("system:kube-scheduler", kube_scheduler_rules()),
        cluster_role(
            "system:volume-scheduler",
            vec![
                rule(&["get", "list", "watch", "update", "patch"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumes"])
                    .build(),
                rule(READ)
                    .groups(&[STORAGE])
                    .resources(&["storageclasses"])
                    .build(),
                rule(&["get", "list", "watch", "update", "patch"])
                    .groups(&[LEGACY])
                    .resources(&["persistentvolumeclaims"])
                    .build(),
            ],
        ),
        cluster_role(
            "system:node-proxier",
            vec![
                rule(&["list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["services", "endpoints"])
                    .build(),
                rule(&["get", "list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["nodes"])
                    .build(),
                events_rule(),
                rule(&["list", "watch"])
                    .groups(&[DISCOVERY])
                    .resources(&["endpointslices"])
                    .build(),
            ],
        ),
        cluster_role(
            "system:service-account-issuer-discovery",
            vec![
                rule(&["get"])
                    .urls(&["/.well-known/openid-configuration", "/openid/v1/jwks"])
                    .build(),
            ],
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            vec![
                rule(&["create"])
                    .groups(&[CERTIFICATES])
                    .resources(&["certificatesigningrequests/nodeclient"])
                    .build(),
            ],
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            vec![
                rule(&["create"])
                    .groups(&[CERTIFICATES])
                    .resources(&["certificatesigningrequests/selfnodeclient"])
                    .build(),
            ],
        ),
        approver(
            "system:certificates.k8s.io:legacy-unknown-approver",
            "kubernetes.io/legacy-unknown",
        ),
        approver(
            "system:certificates.k8s.io:kubelet-serving-approver",
            "kubernetes.io/kubelet-serving",
        ),
        approver(
            "system:certificates.k8s.io:kube-apiserver-client-approver",
            "kubernetes.io/kube-apiserver-client",
        ),
        approver(
            "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
            "kubernetes.io/kube-apiserver-client-kubelet",
        ),
    ]
}

fn aggregate_to_edit() -> Vec<PolicyRule> {
    vec![
        // Read on escalating resources.
        rule(READ)
            .groups(&[LEGACY])
            .resources(&[
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
                "secrets",
                "services/proxy",
            ])
            .build(),
        rule(&["impersonate"])
            .groups(&[LEGACY])
            .resources(&["serviceaccounts"])
            .build(),
        rule(WRITE)
            .groups(&[LEGACY])
            .resources(&[
                "pods",
                "pods/attach",
                "pods/proxy",
                "pods/exec",
                "pods/portforward",
            ])
            .build(),
        rule(&["create"])
            .groups(&[LEGACY])
            .resources(&["pods/eviction"])
            .build(),
        rule(WRITE)
            .groups(&[LEGACY])
            .resources(&[
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/proxy",
                "persistentvolumeclaims",
                "configmaps",
                "secrets",
                "events",
            ])
            .build(),
        rule(&["create"])
            .groups(&[LEGACY])
            .resources(&["serviceaccounts/token"])
            .build(),
        rule(WRITE)
            .groups(&[APPS])
            .resources(&[
                "statefulsets",
                "statefulsets/scale",
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "replicasets",
                "replicasets/scale",
            ])
            .build(),
        rule(WRITE)
            .groups(&[AUTOSCALING])
            .resources(&["horizontalpodautoscalers"])
            .build(),
        rule(WRITE)
            .groups(&[BATCH])
            .resources(&["jobs", "cronjobs"])
            .build(),
        rule(WRITE)
            .groups(&[EXTENSIONS])
            .resources(&[
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "ingresses",
                "replicasets",
                "replicasets/scale",
                "replicationcontrollers/scale",
                "networkpolicies",
            ])
            .build(),
        rule(WRITE)
            .groups(&[POLICY])
            .resources(&["poddisruptionbudgets"])
            .build(),
        rule(WRITE)
            .groups(&[NETWORKING])
            .resources(&["networkpolicies", "ingresses"])
            .build(),
        rule(READ_WRITE)
            .groups(&[COORDINATION])
            .resources(&["leases"])
            .build(),
    ]
}

fn aggregate_to_view() -> Vec<PolicyRule> {
    vec![
        rule(READ)
            .groups(&[LEGACY])
            .resources(&[
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "configmaps",
            ])
            .build(),
        rule(READ)
            .groups(&[LEGACY])
            .resources(&[
                "limitranges",
                "resourcequotas",
                "bindings",
                "events",
                "pods/status",
                "resourcequotas/status",
                "namespaces/status",
                "replicationcontrollers/status",
                "pods/log",
            ])
            .build(),
        // Reading namespaces at the namespace scope means reading *this* one,
        // which tells a user which namespaces they have access to.
        rule(READ)
            .groups(&[LEGACY])
            .resources(&["namespaces"])
            .build(),
        rule(READ)
            .groups(&[DISCOVERY])
            .resources(&["endpointslices"])
            .build(),
        rule(READ)
            .groups(&[APPS])
            .resources(&[
                "controllerrevisions",
                "statefulsets",
                "statefulsets/status",
                "statefulsets/scale",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/status",
                "deployments/scale",
                "replicasets",
                "replicasets/status",
                "replicasets/scale",
            ])
            .build(),
        rule(READ)
            .groups(&[AUTOSCALING])
            .resources(&[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ])
            .build(),
        rule(READ)
            .groups(&[BATCH])
            .resources(&["jobs", "cronjobs", "cronjobs/status", "jobs/status"])
            .build(),
        rule(READ)
            .groups(&[EXTENSIONS])
            .resources(&[
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "ingresses",
                "ingresses/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "replicationcontrollers/scale",
                "networkpolicies",
            ])
            .build(),
        rule(READ)
            .groups(&[POLICY])
            .resources(&["poddisruptionbudgets", "poddisruptionbudgets/status"])
            .build(),
        rule(READ)
            .groups(&[NETWORKING])
            .resources(&["networkpolicies", "ingresses", "ingresses/status"])
            .build(),
    ]
}

/// Enough for the controller manager to start its informers and create the
/// per-controller service accounts and their credentials.
fn kube_controller_manager_rules() -> Vec<PolicyRule> {
    vec![
        events_rule(),
        // Leader election.
        rule(&["create"])
            .groups(&[COORDINATION])
            .resources(&["leases"])
            .build(),
        rule(&["get", "update"])
            .groups(&[COORDINATION])
            .resources(&["leases"])
            .names(&["kube-controller-manager"])
            .build(),
        // Service accounts and their token secrets, for --use-service-account-credentials.
        rule(&["create"])
            .groups(&[LEGACY])
            .resources(&["secrets", "serviceaccounts"])
            .build(),
        rule(&["delete"])
            .groups(&[LEGACY])
            .resources(&["secrets"])
            .build(),
        rule(&["get"])
            .groups(&[LEGACY])
            .resources(&["namespaces", "secrets", "serviceaccounts", "configmaps"])
            .build(),
        rule(&["update"])
            .groups(&[LEGACY])
            .resources(&["secrets", "serviceaccounts"])
            .build(),
        // Delegated authentication and authorization for its own endpoints.
        rule(&["create"])
            .groups(&[AUTHENTICATION])
            .resources(&["tokenreviews"])
            .build(),
        rule(&["create"])
            .groups(&[AUTHORIZATION])
            .resources(&["subjectaccessreviews"])
            .build(),
        // The shared informers and the garbage collector's and quota's discovery.
        rule(&["list", "watch"])
            .groups(&["*"])
            .resources(&["*"])
            .build(),
        rule(&["create"])
            .groups(&[LEGACY])
            .resources(&["serviceaccounts/token"])
            .build(),
    ]
}

fn kube_scheduler_rules() -> Vec<PolicyRule> {
    vec![
        events_rule(),
        // Leader election.
        rule(&["create"])
            .groups(&[COORDINATION])
            .resources(&["leases"])
            .build(),
        rule(&["get", "update"])
            .groups(&[COORDINATION])
            .resources(&["leases"])
            .names(&["kube-scheduler"])
            .build(),
        rule(READ).groups(&[LEGACY]).resources(&["nodes"]).build(),
        rule(&["get", "list", "watch", "delete"])
            .groups(&[LEGACY])
            .resources(&["pods"])
            .build(),
        rule(&["create"])
            .groups(&[LEGACY])
            .resources(&["pods/binding", "bindings"])
            .build(),
        rule(&["patch", "update"])
            .groups(&[LEGACY])
            .resources(&["pods/status"])
            .build(),
        // What its spreading and affinity plugins read.
        rule(READ)
            .groups(&[LEGACY])
            .resources(&["replicationcontrollers", "services"])
            .build(),
        rule(READ)
            .groups(&[APPS, EXTENSIONS])
            .resources(&["replicasets"])
            .build(),
        rule(READ)
            .groups(&[APPS])
            .resources(&["statefulsets"])
            .build(),
        rule(READ)
            .groups(&[POLICY])
            .resources(&["poddisruptionbudgets"])
            .build(),
        rule(READ)
            .groups(&[LEGACY])
            .resources(&["persistentvolumeclaims", "persistentvolumes"])
            .build(),
        // Delegated authentication and authorization for its own endpoints.
        rule(&["create"])
            .groups(&[AUTHENTICATION])
            .resources(&["tokenreviews"])
            .build(),
        rule(&["create"])
            .groups(&[AUTHORIZATION])
            .resources(&["subjectaccessreviews"])
            .build(),
        rule(READ)
            .groups(&[STORAGE])
            .resources(&["csinodes"])
            .build(),
        rule(READ)
            .groups(&[LEGACY])
            .resources(&["namespaces"])
            .build(),
        rule(READ)
            .groups(&[STORAGE])
            .resources(&["csidrivers"])
            .build(),
        rule(READ)
            .groups(&[STORAGE])
            .resources(&["csistoragecapacities"])
            .build(),
    ]
}

pub(super) fn cluster_role_bindings() -> Vec<ClusterRoleBinding> {
    vec![
        cluster_binding("cluster-admin", vec![group(MASTERS)]),
        cluster_binding("system:monitoring", vec![group("system:monitoring")]),
        cluster_binding("system:discovery", vec![group(AUTHENTICATED)]),
        cluster_binding("system:basic-user", vec![group(AUTHENTICATED)]),
        cluster_binding(
            "system:public-info-viewer",
            vec![group(AUTHENTICATED), group(UNAUTHENTICATED)],
        ),
        // Bound to no one: the Node authorizer grants nodes these rules. Upstream
        // keeps the binding, empty, so that reconciling it removes the
        // system:nodes group older releases bound.
        cluster_binding("system:node", vec![]),
        cluster_binding("system:node-proxier", vec![user("system:kube-proxy")]),
        cluster_binding(
            "system:kube-controller-manager",
            vec![user("system:kube-controller-manager")],
        ),
        cluster_binding(
            "system:kube-dns",
            vec![service_account("kube-system", "kube-dns")],
        ),
        cluster_binding("system:kube-scheduler", vec![user("system:kube-scheduler")]),
        cluster_binding(
            "system:volume-scheduler",
            vec![user("system:kube-scheduler")],
        ),
        cluster_binding(
            "system:service-account-issuer-discovery",
            vec![group("system:serviceaccounts")],
        ),
    ]
}
