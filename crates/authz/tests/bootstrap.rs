//! The bootstrap policy evaluated by the authorizer, as a fresh upstream cluster
//! behaves once the aggregation controller has filled admin, edit and view.

use std::collections::HashSet;

use berth_api::user::{AUTHENTICATED, UserInfo};
use berth_authz::{Attributes, Decision, PolicyIndex, aggregate, aggregate_all, bootstrap};
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Binds `user` to ClusterRole `role` in namespace `dev`.
fn dev_binding(role: &str, user: &str) -> RoleBinding {
    RoleBinding {
        metadata: ObjectMeta {
            name: Some(format!("{role}-{user}")),
            namespace: Some("dev".into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "User".into(),
            name: user.into(),
            namespace: None,
        }]),
    }
}

/// The bootstrap policy, aggregated, plus view/edit/admin bindings in `dev`.
fn cluster() -> PolicyIndex {
    let mut cluster_roles = bootstrap::cluster_roles();
    aggregate_all(&mut cluster_roles);
    let mut role_bindings = bootstrap::role_bindings();
    role_bindings.extend([
        dev_binding("view", "viewer"),
        dev_binding("edit", "editor"),
        dev_binding("admin", "boss"),
    ]);
    PolicyIndex::new(
        cluster_roles,
        bootstrap::roles(),
        bootstrap::cluster_role_bindings(),
        role_bindings,
    )
}

fn resource(
    user: &UserInfo,
    verb: &str,
    ns: &str,
    group: &str,
    resource: &str,
    sub: &str,
) -> Attributes {
    Attributes {
        user: user.clone(),
        verb: verb.into(),
        namespace: ns.into(),
        api_group: group.into(),
        resource: resource.into(),
        subresource: sub.into(),
        resource_request: true,
        ..Default::default()
    }
}

fn path(user: &UserInfo, verb: &str, path: &str) -> Attributes {
    Attributes {
        user: user.clone(),
        verb: verb.into(),
        path: path.into(),
        ..Default::default()
    }
}

fn authed(name: &str) -> UserInfo {
    UserInfo::new(name, &[]).with_authenticated_group()
}

#[test]
fn bootstrap_policy_authorizes_as_upstream() {
    let index = cluster();
    let anonymous = UserInfo::anonymous();
    let jane = authed("jane");
    let viewer = authed("viewer");
    let editor = authed("editor");
    let boss = authed("boss");
    let scheduler = authed("system:kube-scheduler");
    let proxy = authed("system:kube-proxy");
    let deployments = UserInfo::new(
        "system:serviceaccount:kube-system:deployment-controller",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
            AUTHENTICATED,
        ],
    );
    let dns = UserInfo::new(
        "system:serviceaccount:kube-system:kube-dns",
        &[AUTHENTICATED],
    );
    let prometheus = UserInfo::new("prometheus", &["system:monitoring", AUTHENTICATED]);
    let pod_sa = UserInfo::new(
        "system:serviceaccount:dev:default",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:dev",
            AUTHENTICATED,
        ],
    );

    let allowed: &[(&str, Attributes)] = &[
        ("anonymous /healthz", path(&anonymous, "get", "/healthz")),
        ("anonymous /livez", path(&anonymous, "get", "/livez")),
        ("anonymous /readyz", path(&anonymous, "get", "/readyz")),
        ("anonymous /version", path(&anonymous, "get", "/version")),
        ("anonymous /version/", path(&anonymous, "get", "/version/")),
        ("authenticated /api", path(&jane, "get", "/api")),
        (
            "authenticated /apis/apps/v1",
            path(&jane, "get", "/apis/apps/v1"),
        ),
        (
            "authenticated /openapi/v3",
            path(&jane, "get", "/openapi/v3"),
        ),
        (
            "authenticated selfsubjectaccessreviews",
            resource(
                &jane,
                "create",
                "",
                "authorization.k8s.io",
                "selfsubjectaccessreviews",
                "",
            ),
        ),
        (
            "authenticated selfsubjectrulesreviews",
            resource(
                &jane,
                "create",
                "",
                "authorization.k8s.io",
                "selfsubjectrulesreviews",
                "",
            ),
        ),
        (
            "authenticated selfsubjectreviews",
            resource(
                &jane,
                "create",
                "",
                "authentication.k8s.io",
                "selfsubjectreviews",
                "",
            ),
        ),
        (
            "view get pods",
            resource(&viewer, "get", "dev", "", "pods", ""),
        ),
        (
            "view get pods/log",
            resource(&viewer, "get", "dev", "", "pods", "log"),
        ),
        (
            "view list deployments.apps",
            resource(&viewer, "list", "dev", "apps", "deployments", ""),
        ),
        (
            "edit create deployments.apps",
            resource(&editor, "create", "dev", "apps", "deployments", ""),
        ),
        (
            "edit get secrets",
            resource(&editor, "get", "dev", "", "secrets", ""),
        ),
        (
            "edit create pods/exec",
            resource(&editor, "create", "dev", "", "pods", "exec"),
        ),
        (
            "edit get pods (from view)",
            resource(&editor, "get", "dev", "", "pods", ""),
        ),
        (
            "admin create rolebindings",
            resource(
                &boss,
                "create",
                "dev",
                "rbac.authorization.k8s.io",
                "rolebindings",
                "",
            ),
        ),
        (
            "admin delete secrets (from edit)",
            resource(&boss, "delete", "dev", "", "secrets", ""),
        ),
        (
            "admin watch pods (from view)",
            resource(&boss, "watch", "dev", "", "pods", ""),
        ),
        (
            "scheduler binds pods",
            resource(&scheduler, "create", "dev", "", "pods", "binding"),
        ),
        (
            "scheduler locks its lease",
            resource(
                &scheduler,
                "update",
                "kube-system",
                "coordination.k8s.io",
                "leases",
                "",
            ),
        ),
        (
            "proxy lists endpointslices",
            resource(&proxy, "list", "", "discovery.k8s.io", "endpointslices", ""),
        ),
        (
            "deployment controller updates replicasets",
            resource(&deployments, "update", "dev", "apps", "replicasets", ""),
        ),
        (
            "kube-dns watches services",
            resource(&dns, "watch", "", "", "services", ""),
        ),
        (
            "system:monitoring gets /metrics",
            path(&prometheus, "get", "/metrics"),
        ),
        (
            "system:monitoring gets /readyz/etcd",
            path(&prometheus, "get", "/readyz/etcd"),
        ),
        (
            "service accounts discover the issuer",
            path(&pod_sa, "get", "/openid/v1/jwks"),
        ),
        (
            "system:masters does anything",
            resource(&UserInfo::admin(), "delete", "", "", "nodes", ""),
        ),
    ];
    for (name, a) in allowed {
        assert_eq!(index.authorize(a).0, Decision::Allow, "{name}");
    }

    let denied: &[(&str, Attributes)] = &[
        (
            "anonymous list pods",
            resource(&anonymous, "list", "default", "", "pods", ""),
        ),
        ("anonymous /api", path(&anonymous, "get", "/api")),
        (
            "anonymous selfsubjectaccessreviews",
            resource(
                &anonymous,
                "create",
                "",
                "authorization.k8s.io",
                "selfsubjectaccessreviews",
                "",
            ),
        ),
        ("authenticated /metrics", path(&jane, "get", "/metrics")),
        (
            "authenticated list pods",
            resource(&jane, "list", "dev", "", "pods", ""),
        ),
        (
            "view get secrets",
            resource(&viewer, "get", "dev", "", "secrets", ""),
        ),
        (
            "view create pods",
            resource(&viewer, "create", "dev", "", "pods", ""),
        ),
        (
            "view outside its namespace",
            resource(&viewer, "get", "prod", "", "pods", ""),
        ),
        (
            "edit create rolebindings",
            resource(
                &editor,
                "create",
                "dev",
                "rbac.authorization.k8s.io",
                "rolebindings",
                "",
            ),
        ),
        (
            "edit update resourcequotas",
            resource(&editor, "update", "dev", "", "resourcequotas", ""),
        ),
        (
            "admin lists nodes",
            resource(&boss, "list", "", "", "nodes", ""),
        ),
        (
            "scheduler locks others' leases",
            resource(
                &scheduler,
                "update",
                "default",
                "coordination.k8s.io",
                "leases",
                "",
            ),
        ),
        (
            "deployment controller deletes nodes",
            resource(&deployments, "delete", "", "", "nodes", ""),
        ),
        (
            "a pod's service account lists pods",
            resource(&pod_sa, "list", "dev", "", "pods", ""),
        ),
    ];
    for (name, a) in denied {
        let (decision, reason) = index.authorize(a);
        assert_eq!(decision, Decision::NoOpinion, "{name}");
        // Every bootstrap binding resolves, so a miss carries no error text.
        assert_eq!(reason, "", "{name}");
    }
}

#[test]
fn bootstrap_roles_aggregate_as_upstream() {
    let roles = bootstrap::cluster_roles();
    let find = |name: &str| {
        roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
    };
    let Some(view) = find("view") else {
        panic!("no view role");
    };
    // One pass gives view exactly system:aggregate-to-view's rules.
    let aggregate_to_view = find("system:aggregate-to-view").and_then(|r| r.rules.clone());
    assert_eq!(aggregate(view, &roles), aggregate_to_view);
    assert_eq!(
        find("cluster-admin").and_then(|r| aggregate(r, &roles)),
        None
    );

    let mut settled = roles.clone();
    aggregate_all(&mut settled);
    let rules_of = |name: &str| -> Vec<PolicyRule> {
        settled
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .and_then(|r| r.rules.clone())
            .unwrap_or_default()
    };
    let (view, edit, admin) = (rules_of("view"), rules_of("edit"), rules_of("admin"));
    assert!(!view.is_empty());
    assert!(view.iter().all(|r| edit.contains(r)), "edit includes view");
    assert!(
        edit.iter().all(|r| admin.contains(r)),
        "admin includes edit"
    );
    assert_eq!(
        admin.len(),
        edit.len() + rules_of("system:aggregate-to-admin").len()
    );
}

#[test]
fn bootstrap_objects_carry_upstream_metadata_and_resolve() {
    let cluster_roles = bootstrap::cluster_roles();
    let bindings = bootstrap::cluster_role_bindings();
    let roles = bootstrap::roles();
    let role_bindings = bootstrap::role_bindings();
    let metas = cluster_roles
        .iter()
        .map(|r| &r.metadata)
        .chain(bindings.iter().map(|b| &b.metadata))
        .chain(roles.iter().map(|r| &r.metadata))
        .chain(role_bindings.iter().map(|b| &b.metadata));
    for meta in metas {
        let name = meta.name.as_deref().unwrap_or("");
        let label = meta
            .labels
            .as_ref()
            .and_then(|l| l.get("kubernetes.io/bootstrapping"));
        assert_eq!(label.map(String::as_str), Some("rbac-defaults"), "{name}");
        let autoupdate = meta
            .annotations
            .as_ref()
            .and_then(|a| a.get("rbac.authorization.kubernetes.io/autoupdate"));
        assert_eq!(autoupdate.map(String::as_str), Some("true"), "{name}");
    }

    let mut names = HashSet::new();
    for r in &cluster_roles {
        assert!(
            names.insert(r.metadata.name.clone()),
            "duplicate {:?}",
            r.metadata.name
        );
    }
    let expected = [
        "cluster-admin",
        "admin",
        "edit",
        "view",
        "system:aggregate-to-admin",
        "system:aggregate-to-edit",
        "system:aggregate-to-view",
        "system:basic-user",
        "system:discovery",
        "system:public-info-viewer",
        "system:monitoring",
        "system:node",
        "system:node-proxier",
        "system:kube-scheduler",
        "system:kube-controller-manager",
        "system:kube-dns",
        "system:node-bootstrapper",
        "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
        "system:certificates.k8s.io:kube-apiserver-client-approver",
        "system:volume-scheduler",
        "system:auth-delegator",
        "system:heapster",
        "system:controller:clusterrole-aggregation-controller",
        "system:controller:cronjob-controller",
        "system:controller:daemon-set-controller",
        "system:controller:deployment-controller",
        "system:controller:endpoint-controller",
        "system:controller:endpointslice-controller",
        "system:controller:endpointslicemirroring-controller",
        "system:controller:generic-garbage-collector",
        "system:controller:horizontal-pod-autoscaler",
        "system:controller:job-controller",
        "system:controller:namespace-controller",
        "system:controller:node-controller",
        "system:controller:persistent-volume-binder",
        "system:controller:pod-garbage-collector",
        "system:controller:replicaset-controller",
        "system:controller:replication-controller",
        "system:controller:resourcequota-controller",
        "system:controller:root-ca-cert-publisher",
        "system:controller:service-account-controller",
        "system:controller:statefulset-controller",
        "system:controller:ttl-after-finished-controller",
        "system:controller:ttl-controller",
        "system:controller:pvc-protection-controller",
        "system:controller:pv-protection-controller",
        "system:controller:certificate-controller",
        "system:controller:disruption-controller",
        "system:controller:ephemeral-volume-controller",
    ];
    for name in expected {
        assert!(names.contains(&Some(name.to_string())), "missing {name}");
    }

    // Every binding's role exists, so nothing is skipped at evaluation.
    let index = PolicyIndex::new(cluster_roles, roles, vec![], vec![]);
    for b in &bindings {
        assert!(
            index
                .role_ref_rules("", &b.role_ref.kind, &b.role_ref.name)
                .is_some(),
            "{:?}",
            b.metadata.name
        );
    }
    for b in &role_bindings {
        let ns = b.metadata.namespace.as_deref().unwrap_or("");
        assert!(
            index
                .role_ref_rules(ns, &b.role_ref.kind, &b.role_ref.name)
                .is_some(),
            "{:?}",
            b.metadata.name
        );
    }
    // Controller roles are bound to their controller's service account.
    let controller = bindings
        .iter()
        .find(|b| b.metadata.name.as_deref() == Some("system:controller:job-controller"));
    let subject = controller
        .and_then(|b| b.subjects.as_ref())
        .and_then(|s| s.first());
    assert_eq!(
        subject.map(|s| (s.kind.as_str(), s.namespace.as_deref(), s.name.as_str())),
        Some(("ServiceAccount", Some("kube-system"), "job-controller"))
    );
}

#[test]
fn bootstrap_rules_are_sorted_as_upstream_stores_them() {
    let roles = bootstrap::cluster_roles();
    let admin_extra = roles
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some("system:aggregate-to-admin"))
        .and_then(|r| r.rules.clone());
    let owned = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(
        admin_extra,
        Some(vec![
            PolicyRule {
                api_groups: owned(&["authorization.k8s.io"]),
                resources: owned(&["localsubjectaccessreviews"]),
                verbs: vec!["create".into()],
                ..Default::default()
            },
            PolicyRule {
                api_groups: owned(&["rbac.authorization.k8s.io"]),
                resources: owned(&["rolebindings", "roles"]),
                verbs: [
                    "create",
                    "delete",
                    "deletecollection",
                    "get",
                    "list",
                    "patch",
                    "update",
                    "watch"
                ]
                .iter()
                .map(|s| s.to_string())
                .collect(),
                ..Default::default()
            },
        ])
    );
}

#[test]
fn anonymous_rules_review_lists_the_public_paths() {
    let index = cluster();
    let review = index.rules_for(&UserInfo::anonymous(), "default");
    assert!(review.resource_rules.is_empty());
    assert!(!review.incomplete);
    let urls: Vec<&str> = review
        .non_resource_rules
        .iter()
        .flat_map(|r| r.non_resource_urls.iter().flatten())
        .map(String::as_str)
        .collect();
    assert_eq!(
        urls,
        ["/healthz", "/livez", "/readyz", "/version", "/version/"]
    );
}
