//! Upstream's `namespace_policy.go`: Roles and RoleBindings in kube-system and
//! kube-public.

use k8s_openapi::api::rbac::v1::{Role, RoleBinding};

use super::builder::*;

const KUBE_SYSTEM: &str = "kube-system";
const KUBE_PUBLIC: &str = "kube-public";

/// Leader election of a control-plane component, in kube-system.
fn leader_locking(name: &str) -> Role {
    let verbs = &["watch", "get", "list", "create", "update"];
    role(
        KUBE_SYSTEM,
        name,
        vec![
            rule(verbs)
                .groups(&[COORDINATION])
                .resources(&["leases"])
                .build(),
            // Coordinated leader election's candidates.
            rule(verbs)
                .groups(&[COORDINATION])
                .resources(&["leasecandidates"])
                .build(),
        ],
    )
}

pub(super) fn roles() -> Vec<Role> {
    vec![
        // Lets extension API servers read the client CA that authenticates the
        // requests the kube-apiserver proxies to them.
        role(
            KUBE_SYSTEM,
            "extension-apiserver-authentication-reader",
            vec![
                rule(READ)
                    .groups(&[LEGACY])
                    .resources(&["configmaps"])
                    .names(&["extension-apiserver-authentication"])
                    .build(),
            ],
        ),
        leader_locking("system::leader-locking-kube-controller-manager"),
        leader_locking("system::leader-locking-kube-scheduler"),
        // Reads bootstrap token secrets to sign kube-public/cluster-info.
        role(
            KUBE_SYSTEM,
            "system:controller:bootstrap-signer",
            vec![rule(READ).groups(&[LEGACY]).resources(&["secrets"]).build()],
        ),
        role(
            KUBE_SYSTEM,
            "system:controller:cloud-provider",
            vec![
                rule(&["create", "get", "list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["configmaps"])
                    .build(),
            ],
        ),
        // Deletes expired bootstrap token secrets.
        role(
            KUBE_SYSTEM,
            "system:controller:token-cleaner",
            vec![
                rule(&["delete", "get", "list", "watch"])
                    .groups(&[LEGACY])
                    .resources(&["secrets"])
                    .build(),
                events_rule(),
            ],
        ),
        role(
            KUBE_PUBLIC,
            "system:controller:bootstrap-signer",
            vec![
                rule(READ)
                    .groups(&[LEGACY])
                    .resources(&["configmaps"])
                    .build(),
                rule(&["update"])
                    .groups(&[LEGACY])
                    .resources(&["configmaps"])
                    .names(&["cluster-info"])
                    .build(),
                events_rule(),
            ],
        ),
    ]
}

pub(super) fn role_bindings() -> Vec<RoleBinding> {
    vec![
        // Upstream names this binding with a `system::` prefix its role lacks.
        role_binding(
            KUBE_SYSTEM,
            "system::extension-apiserver-authentication-reader",
            "extension-apiserver-authentication-reader",
            vec![
                user("system:kube-controller-manager"),
                user("system:kube-scheduler"),
            ],
        ),
        role_binding(
            KUBE_SYSTEM,
            "system::leader-locking-kube-controller-manager",
            "system::leader-locking-kube-controller-manager",
            vec![
                user("system:kube-controller-manager"),
                service_account(KUBE_SYSTEM, "kube-controller-manager"),
                service_account(KUBE_SYSTEM, "leader-election-controller"),
            ],
        ),
        role_binding(
            KUBE_SYSTEM,
            "system::leader-locking-kube-scheduler",
            "system::leader-locking-kube-scheduler",
            vec![
                user("system:kube-scheduler"),
                service_account(KUBE_SYSTEM, "kube-scheduler"),
            ],
        ),
        role_binding(
            KUBE_SYSTEM,
            "system:controller:bootstrap-signer",
            "system:controller:bootstrap-signer",
            vec![service_account(KUBE_SYSTEM, "bootstrap-signer")],
        ),
        role_binding(
            KUBE_SYSTEM,
            "system:controller:cloud-provider",
            "system:controller:cloud-provider",
            vec![service_account(KUBE_SYSTEM, "cloud-provider")],
        ),
        role_binding(
            KUBE_SYSTEM,
            "system:controller:token-cleaner",
            "system:controller:token-cleaner",
            vec![service_account(KUBE_SYSTEM, "token-cleaner")],
        ),
        role_binding(
            KUBE_PUBLIC,
            "system:controller:bootstrap-signer",
            "system:controller:bootstrap-signer",
            vec![service_account(KUBE_SYSTEM, "bootstrap-signer")],
        ),
    ]
}
