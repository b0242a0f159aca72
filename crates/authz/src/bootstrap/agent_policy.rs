//! Berth's additions for nodes that join with a bootstrap token (`berth agent
//! --token <id>.<secret>`): not upstream's default policy, which binds none of
//! the bootstrap roles, but what kubeadm creates at `kubeadm init` (and k3s
//! at start) so that TLS bootstrapping works out of the box, plus the roles of
//! Berth's own components that upstream runs as add-ons (the node-local
//! ingress controller, the NetworkPolicy controller, the local-path
//! provisioner, the cluster DNS).

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding, RoleRef};

use super::builder::*;

/// The group of every bootstrap token's user.
pub const BOOTSTRAPPERS_GROUP: &str = "system:bootstrappers";
/// The group of every node's user.
pub const NODES_GROUP: &str = "system:nodes";
/// The user the service proxy runs as on a joined node (upstream's
/// `system:node-proxier` binding names it).
pub const KUBE_PROXY_USER: &str = "system:kube-proxy";
/// The user Berth's ingress controller runs as on a joined node, and its role.
pub const INGRESS_USER: &str = "system:berth-ingress";
pub const INGRESS_ROLE: &str = "system:berth-ingress";
/// The role of Berth's NetworkPolicy controller (`crates/netpol`), which runs
/// as [`KUBE_PROXY_USER`] on a joined node (k3s's agent runs kube-router's
/// policy controller under its one agent identity).
pub const NETWORK_POLICY_ROLE: &str = "system:berth-network-policy";
/// The role of the local-path provisioner each node agent runs for its own
/// node (`crates/kubelet/src/localpath`), bound to every node; NodeRestriction
/// narrows the PVs a node creates or deletes to those pinned to itself.
pub const LOCAL_PATH_ROLE: &str = "system:berth-local-path-provisioner";

/// The user the cluster DNS inside `berth server` runs as (upstream's CoreDNS
/// add-on runs as the ServiceAccount kube-system/coredns with kubeadm's
/// `system:coredns` role), and its roles: reading Services and
/// EndpointSlices everywhere, keeping its own Service and Endpoints
/// `kube-system/kube-dns`.
pub const DNS_USER: &str = "system:berth-dns";
pub const DNS_ROLE: &str = "system:berth-dns";
const KUBE_SYSTEM: &str = "kube-system";
const DNS_SERVICE: &str = "kube-dns";

const NODE_BOOTSTRAPPER: &str = "system:node-bootstrapper";
const NODE_CLIENT: &str = "system:certificates.k8s.io:certificatesigningrequests:nodeclient";
const SELF_NODE_CLIENT: &str =
    "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient";

/// What the ingress controller reads and writes (`crates/ingress`): the
/// Ingresses of its classes and their backends, TLS Secrets, the Nodes whose
/// addresses make `status.loadBalancer`, the annotation on its own Node (RBAC
/// cannot say "its own": any Node may be patched), Ingress status and events.
fn ingress_rules() -> Vec<k8s_openapi::api::rbac::v1::PolicyRule> {
    vec![
        rule(READ)
            .groups(&[NETWORKING])
            .resources(&["ingresses", "ingressclasses"])
            .build(),
        rule(&["update", "patch"])
            .groups(&[NETWORKING])
            .resources(&["ingresses/status"])
            .build(),
        rule(READ)
            .groups(&[LEGACY])
            .resources(&["services", "secrets", "nodes"])
            .build(),
        rule(&["patch"])
            .groups(&[LEGACY])
            .resources(&["nodes"])
            .build(),
        rule(READ)
            .groups(&[DISCOVERY])
            .resources(&["endpointslices"])
            .build(),
        events_rule(),
    ]
}

/// What the policy controller watches: every node's pods (peers live
/// anywhere), namespaces (namespaceSelector) and the policies; it writes
/// nothing.
fn network_policy_rules() -> Vec<k8s_openapi::api::rbac::v1::PolicyRule> {
    vec![
        rule(READ)
            .groups(&[LEGACY])
            .resources(&["pods", "namespaces"])
            .build(),
        rule(READ)
            .groups(&[NETWORKING])
            .resources(&["networkpolicies"])
            .build(),
    ]
}

/// What the local-path provisioner needs beyond `system:node`: it watches
/// every claim (a claim names its node only in the selected-node annotation),
/// volume and class, creates and deletes the volumes of its node, and records
/// Provisioning events on claims.
fn local_path_rules() -> Vec<k8s_openapi::api::rbac::v1::PolicyRule> {
    vec![
        rule(READ)
            .groups(&[LEGACY])
            .resources(&["persistentvolumeclaims", "persistentvolumes"])
            .build(),
        rule(&["create", "delete"])
            .groups(&[LEGACY])
            .resources(&["persistentvolumes"])
            .build(),
        rule(READ)
            .groups(&[STORAGE])
            .resources(&["storageclasses"])
            .build(),
        events_rule(),
    ]
}

/// What the cluster DNS reads to build its zone.
fn dns_rules() -> Vec<k8s_openapi::api::rbac::v1::PolicyRule> {
    vec![
        rule(&["list", "watch"])
            .groups(&[LEGACY])
            .resources(&["services"])
            .build(),
        rule(&["list", "watch"])
            .groups(&[DISCOVERY])
            .resources(&["endpointslices"])
            .build(),
    ]
}

/// What the cluster DNS writes: its Service and Endpoints in kube-system
/// (RBAC cannot name what is created, so creation is by kind).
fn dns_upkeep_rules() -> Vec<k8s_openapi::api::rbac::v1::PolicyRule> {
    vec![
        rule(&["create"])
            .groups(&[LEGACY])
            .resources(&["services", "endpoints"])
            .build(),
        rule(&["get"])
            .groups(&[LEGACY])
            .resources(&["services", "endpoints"])
            .names(&[DNS_SERVICE])
            .build(),
        rule(&["update"])
            .groups(&[LEGACY])
            .resources(&["endpoints"])
            .names(&[DNS_SERVICE])
            .build(),
    ]
}

pub(super) fn roles() -> Vec<Role> {
    vec![role(KUBE_SYSTEM, DNS_ROLE, dns_upkeep_rules())]
}

pub(super) fn role_bindings() -> Vec<RoleBinding> {
    vec![role_binding(
        KUBE_SYSTEM,
        DNS_ROLE,
        DNS_ROLE,
        vec![user(DNS_USER)],
    )]
}

pub(super) fn cluster_roles() -> Vec<ClusterRole> {
    vec![
        cluster_role(DNS_ROLE, dns_rules()),
        cluster_role(INGRESS_ROLE, ingress_rules()),
        cluster_role(NETWORK_POLICY_ROLE, network_policy_rules()),
        cluster_role(LOCAL_PATH_ROLE, local_path_rules()),
    ]
}

/// A binding named `name` (kubeadm's bindings are not named after their role).
fn named_binding(
    name: &str,
    role: &str,
    subjects: Vec<k8s_openapi::api::rbac::v1::Subject>,
) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(None, name, &[]),
        role_ref: RoleRef {
            api_group: RBAC_GROUP.into(),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(subjects),
    }
}

pub(super) fn cluster_role_bindings() -> Vec<ClusterRoleBinding> {
    vec![
        // kubeadm's `kubeadm:kubelet-bootstrap`: bootstrap tokens may create
        // and watch CertificateSigningRequests.
        named_binding(
            "berth:kubelet-bootstrap",
            NODE_BOOTSTRAPPER,
            vec![group(BOOTSTRAPPERS_GROUP)],
        ),
        // kubeadm's `kubeadm:node-autoapprove-bootstrap`: the approver's
        // SubjectAccessReview on `certificatesigningrequests/nodeclient`.
        named_binding(
            "berth:node-autoapprove-bootstrap",
            NODE_CLIENT,
            vec![group(BOOTSTRAPPERS_GROUP)],
        ),
        // kubeadm's `kubeadm:node-autoapprove-certificate-rotation`: a node
        // renewing its own certificate (`selfnodeclient`).
        named_binding(
            "berth:node-autoapprove-certificate-rotation",
            SELF_NODE_CLIENT,
            vec![group(NODES_GROUP)],
        ),
        cluster_binding(DNS_ROLE, vec![user(DNS_USER)]),
        cluster_binding(INGRESS_ROLE, vec![user(INGRESS_USER)]),
        cluster_binding(NETWORK_POLICY_ROLE, vec![user(KUBE_PROXY_USER)]),
        cluster_binding(LOCAL_PATH_ROLE, vec![group(NODES_GROUP)]),
    ]
}

#[cfg(test)]
mod tests {
    use berth_api::user::UserInfo;

    use crate::{Attributes, Decision, PolicyIndex};

    fn index() -> PolicyIndex {
        PolicyIndex::new(
            super::super::cluster_roles(),
            super::super::roles(),
            super::super::cluster_role_bindings(),
            super::super::role_bindings(),
        )
    }

    fn ask(user: &UserInfo, verb: &str, group: &str, resource: &str) -> Decision {
        ask_in(user, verb, group, resource, "", "")
    }

    /// `resource` may name a subresource (`pods/status`); `namespace` and
    /// `name` may be empty.
    fn ask_in(
        user: &UserInfo,
        verb: &str,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Decision {
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        let a = Attributes {
            user: user.clone(),
            verb: verb.into(),
            api_group: group.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: namespace.into(),
            name: name.into(),
            resource_request: true,
            ..Default::default()
        };
        index().authorize(&a).0
    }

    /// The cluster DNS reads Services and EndpointSlices everywhere and keeps
    /// only its own Service and Endpoints in kube-system.
    /// (verb, resource, namespace, name, allowed).
    #[test]
    fn the_cluster_dns_keeps_only_its_own_service() {
        let dns = UserInfo::new(super::DNS_USER, &["system:authenticated"]);
        let cases = [
            ("watch", "", "services", "", "", true),
            ("list", "discovery.k8s.io", "endpointslices", "", "", true),
            ("create", "", "services", "kube-system", "", true),
            ("get", "", "services", "kube-system", "kube-dns", true),
            ("get", "", "endpoints", "kube-system", "kube-dns", true),
            ("update", "", "endpoints", "kube-system", "kube-dns", true),
            ("create", "", "endpoints", "kube-system", "", true),
            ("update", "", "endpoints", "kube-system", "other", false),
            ("get", "", "services", "kube-system", "other", false),
            ("update", "", "services", "kube-system", "kube-dns", false),
            ("create", "", "services", "default", "", false),
            ("delete", "", "services", "kube-system", "kube-dns", false),
            ("list", "", "secrets", "", "", false),
            ("list", "", "pods", "", "", false),
        ];
        for (verb, group, resource, ns, name, allowed) in cases {
            let want = if allowed {
                Decision::Allow
            } else {
                Decision::NoOpinion
            };
            assert_eq!(
                ask_in(&dns, verb, group, resource, ns, name),
                want,
                "{verb} {group}/{resource} {ns}/{name}"
            );
        }
    }

    /// (who, verb, group, resource[/subresource], allowed).
    #[test]
    fn joined_node_components_may_do_what_they_need_and_no_more() {
        let csr = "certificates.k8s.io";
        let bootstrap = UserInfo::new(
            "system:bootstrap:abcdef",
            &["system:bootstrappers", "system:authenticated"],
        );
        let node = UserInfo::new("system:node:n1", &["system:nodes", "system:authenticated"]);
        let ingress = UserInfo::new(super::INGRESS_USER, &["system:authenticated"]);
        let proxy = UserInfo::new(super::KUBE_PROXY_USER, &["system:authenticated"]);
        let cases = [
            (
                &bootstrap,
                "create",
                csr,
                "certificatesigningrequests",
                true,
            ),
            (&bootstrap, "watch", csr, "certificatesigningrequests", true),
            (
                &bootstrap,
                "create",
                csr,
                "certificatesigningrequests/nodeclient",
                true,
            ),
            (
                &bootstrap,
                "create",
                csr,
                "certificatesigningrequests/selfnodeclient",
                false,
            ),
            (
                &bootstrap,
                "update",
                csr,
                "certificatesigningrequests/approval",
                false,
            ),
            (&bootstrap, "list", "", "secrets", false),
            (&bootstrap, "create", "", "nodes", false),
            (
                &node,
                "create",
                csr,
                "certificatesigningrequests/selfnodeclient",
                true,
            ),
            (
                &node,
                "create",
                csr,
                "certificatesigningrequests/nodeclient",
                false,
            ),
            (&ingress, "watch", "networking.k8s.io", "ingresses", true),
            (
                &ingress,
                "list",
                "networking.k8s.io",
                "ingressclasses",
                true,
            ),
            (
                &ingress,
                "patch",
                "networking.k8s.io",
                "ingresses/status",
                true,
            ),
            (&ingress, "list", "", "secrets", true),
            (
                &ingress,
                "watch",
                "discovery.k8s.io",
                "endpointslices",
                true,
            ),
            (&ingress, "patch", "", "nodes", true),
            (&ingress, "create", "", "events", true),
            (&ingress, "update", "networking.k8s.io", "ingresses", false),
            (&ingress, "create", "", "pods", false),
            (&ingress, "update", "", "secrets", false),
            (&proxy, "watch", "", "services", true),
            (&proxy, "list", "discovery.k8s.io", "endpointslices", true),
            (&proxy, "list", "", "secrets", false),
            (&proxy, "watch", "", "pods", true),
            (&proxy, "list", "", "namespaces", true),
            (&proxy, "list", "networking.k8s.io", "networkpolicies", true),
            (
                &proxy,
                "watch",
                "networking.k8s.io",
                "networkpolicies",
                true,
            ),
            (
                &proxy,
                "create",
                "networking.k8s.io",
                "networkpolicies",
                false,
            ),
            (&proxy, "delete", "", "pods", false),
            (&node, "watch", "", "persistentvolumeclaims", true),
            (&node, "list", "", "persistentvolumes", true),
            (&node, "create", "", "persistentvolumes", true),
            (&node, "delete", "", "persistentvolumes", true),
            (&node, "watch", "storage.k8s.io", "storageclasses", true),
            (&node, "create", "", "events", true),
            (&node, "update", "", "persistentvolumes", false),
            (&node, "delete", "", "persistentvolumeclaims", false),
            (&node, "create", "storage.k8s.io", "storageclasses", false),
            (&proxy, "create", "", "persistentvolumes", false),
            (
                &ingress,
                "list",
                "networking.k8s.io",
                "networkpolicies",
                false,
            ),
        ];
        for (user, verb, group, resource, allowed) in cases {
            let want = if allowed {
                Decision::Allow
            } else {
                Decision::NoOpinion
            };
            assert_eq!(
                ask(user, verb, group, resource),
                want,
                "{} {verb} {group}/{resource}",
                user.name
            );
        }
    }
}
