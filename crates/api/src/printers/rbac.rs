//! `rbac.authorization.k8s.io/v1` kinds. Role and ClusterRole have no printer
//! upstream and get the default table.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::format::{arr, name, str_at};
use super::{AGE, NAME, Printer, age, col, wide};

pub(super) fn printer(kind: &str) -> Option<&'static Printer> {
    Some(match kind {
        "RoleBinding" => &ROLE_BINDING,
        "ClusterRoleBinding" => &CLUSTER_ROLE_BINDING,
        _ => return None,
    })
}

static ROLE_BINDING: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Role",
            "string",
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace.",
        ),
        AGE,
        wide("Users", "string", "Users in the roleBinding"),
        wide("Groups", "string", "Groups in the roleBinding"),
        wide(
            "ServiceAccounts",
            "string",
            "ServiceAccounts in the roleBinding",
        ),
    ],
    cells: binding_cells,
};

static CLUSTER_ROLE_BINDING: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Role",
            "string",
            "RoleRef can only reference a ClusterRole in the global namespace.",
        ),
        AGE,
        wide("Users", "string", "Users in the clusterRoleBinding"),
        wide("Groups", "string", "Groups in the clusterRoleBinding"),
        wide(
            "ServiceAccounts",
            "string",
            "ServiceAccounts in the clusterRoleBinding",
        ),
    ],
    cells: binding_cells,
};

/// Upstream `printRoleBinding` with `rbac.SubjectsStrings`; subjects of other
/// kinds are not shown.
fn binding_cells(o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for s in arr(o, &["subjects"]) {
        let subject = str_at(s, &["name"]);
        match str_at(s, &["kind"]) {
            "ServiceAccount" => sas.push(format!("{}/{subject}", str_at(s, &["namespace"]))),
            "User" => users.push(subject.to_string()),
            "Group" => groups.push(subject.to_string()),
            _ => {}
        }
    }
    let role = format!(
        "{}/{}",
        str_at(o, &["roleRef", "kind"]),
        str_at(o, &["roleRef", "name"])
    );
    vec![
        name(o).into(),
        role.into(),
        age(o, now).into(),
        users.join(", ").into(),
        groups.join(", ").into(),
        sas.join(", ").into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{ago, now};
    use super::*;
    use serde_json::json;

    #[test]
    fn binding_rows() {
        let rb = json!({"metadata": {"name": "admins", "creationTimestamp": ago(20)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "admin"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"},
                         {"kind": "Group", "name": "system:masters"},
                         {"kind": "ServiceAccount", "name": "default", "namespace": "kube-system"}]});
        assert_eq!(
            Value::from(binding_cells(&rb, now())),
            json!([
                "admins",
                "ClusterRole/admin",
                "20s",
                "alice, bob",
                "system:masters",
                "kube-system/default"
            ])
        );
        assert_eq!(
            Value::from(binding_cells(&json!({"metadata": {"name": "e"}}), now())),
            json!(["e", "/", "<unknown>", "", "", ""])
        );
    }
}
