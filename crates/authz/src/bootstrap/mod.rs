//! Upstream's bootstrap RBAC policy (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy`):
//! the roles and bindings the API server creates at start and keeps up to date
//! while they carry `rbac.authorization.kubernetes.io/autoupdate: "true"`.
//!
//! The content is upstream's default (feature-gated rules left out), as its
//! generated `testdata/*.yaml` shows it: `policy.rs` is `policy.go`,
//! `controller_policy.rs` is `controller_policy.go` (only the controllers Berth
//! runs), `namespace_policy.rs` is `namespace_policy.go`; `agent_policy.rs`
//! holds Berth's additions for nodes joining with bootstrap tokens (kubeadm's
//! TLS-bootstrap bindings, the ingress controller's role).

pub mod agent_policy;
mod builder;
mod controller_policy;
mod namespace_policy;
mod policy;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};

/// The label every bootstrap object carries.
pub const BOOTSTRAPPING_LABEL: &str = "kubernetes.io/bootstrapping";
/// Its value.
pub const BOOTSTRAPPING_VALUE: &str = "rbac-defaults";
/// While "true", the API server resets the object to its bootstrap content.
pub const AUTOUPDATE_ANNOTATION: &str = "rbac.authorization.kubernetes.io/autoupdate";
/// The labels the `admin`, `edit` and `view` aggregation rules select.
pub const AGGREGATE_TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
pub const AGGREGATE_TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
pub const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

/// Upstream's bootstrap ClusterRoles: `policy.go`'s and the `system:controller:*`
/// roles of the controllers Berth runs, then Berth's agent roles. `admin`, `edit` and `view` have only
/// their aggregationRule; the aggregation controller fills their rules.
pub fn cluster_roles() -> Vec<ClusterRole> {
    let mut roles = policy::cluster_roles();
    roles.extend(controller_policy::controller_roles());
    roles.extend(agent_policy::cluster_roles());
    roles
}

/// Upstream's bootstrap ClusterRoleBindings, including one per controller role to
/// the controller's ServiceAccount in kube-system, then kubeadm's TLS-bootstrap
/// bindings and the ingress controller's (`agent_policy`).
pub fn cluster_role_bindings() -> Vec<ClusterRoleBinding> {
    let mut bindings = policy::cluster_role_bindings();
    bindings.extend(controller_policy::controller_role_bindings());
    bindings.extend(agent_policy::cluster_role_bindings());
    bindings
}

/// Upstream's namespaced bootstrap Roles (kube-system and kube-public), then
/// Berth's (`agent_policy`).
pub fn roles() -> Vec<Role> {
    let mut roles = namespace_policy::roles();
    roles.extend(agent_policy::roles());
    roles
}

/// Upstream's namespaced bootstrap RoleBindings (kube-system and kube-public),
/// then Berth's (`agent_policy`).
pub fn role_bindings() -> Vec<RoleBinding> {
    let mut bindings = namespace_policy::role_bindings();
    bindings.extend(agent_policy::role_bindings());
    bindings
}
