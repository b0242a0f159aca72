//! What exists from the start, as upstream's bootstrap makes it: the system
//! namespaces, the built-in PriorityClasses and the RBAC bootstrap policy
//! (roles and bindings reconciled at every start, as upstream's
//! `rbac/bootstrap-roles` post-start hook).

use anyhow::{Context, Result};
use serde_json::{Value, json};

use crate::SYSTEM_NAMESPACES;
use crate::rest::Rest;

/// Upstream's built-in PriorityClasses (name, value, description).
const SYSTEM_PRIORITY_CLASSES: &[(&str, i64, &str)] = &[
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    ),
];

/// Creates the system namespaces and PriorityClasses when missing.
pub async fn run(rest: &Rest) -> Result<()> {
    let pc_rt = berth_api::registry::lookup("scheduling.k8s.io", "v1", "priorityclasses")
        .context("priorityclasses not registered")?;
    let pc_rp = crate::request::ResourcePath {
        rt: pc_rt,
        namespace: None,
        name: None,
        subresource: None,
        legacy_watch: false,
    };
    for (name, value, description) in SYSTEM_PRIORITY_CLASSES {
        if rest
            .store
            .get(&crate::objects::key(pc_rt, None, name))
            .await?
            .is_some()
        {
            continue;
        }
        let body = json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, "description": description});
        match rest
            .create(&pc_rp, body, &crate::request::Query::default())
            .await
        {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => anyhow::bail!("creating PriorityClass {name}: {e}"),
        }
    }
    let rt =
        berth_api::registry::lookup("", "v1", "namespaces").context("namespaces not registered")?;
    let rp = crate::request::ResourcePath {
        rt,
        namespace: None,
        name: None,
        subresource: None,
        legacy_watch: false,
    };
    for ns in SYSTEM_NAMESPACES {
        if rest
            .store
            .get(&crate::objects::key(rt, None, ns))
            .await?
            .is_some()
        {
            continue;
        }
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns}}});
        match rest
            .create(&rp, body, &crate::request::Query::default())
            .await
        {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => anyhow::bail!("creating namespace {ns}: {e}"),
        }
    }
    rbac(rest).await
}

/// Reconciles upstream's bootstrap RBAC policy: what is missing is created;
/// an object that is there and not marked
/// `rbac.authorization.kubernetes.io/autoupdate: "false"` gets back the
/// rules, subjects, labels and annotations it lacks (extra ones stay, as
/// upstream's reconciliation without `--remove-extra-permissions`).
async fn rbac(rest: &Rest) -> Result<()> {
    use berth_authz::bootstrap;
    let mut objects: Vec<(&str, Value)> = Vec::new();
    let to_value = |v: Result<Value, serde_json::Error>| v.context("encoding bootstrap policy");
    for r in bootstrap::cluster_roles() {
        objects.push(("clusterroles", to_value(serde_json::to_value(r))?));
    }
    for r in bootstrap::roles() {
        objects.push(("roles", to_value(serde_json::to_value(r))?));
    }
    for b in bootstrap::cluster_role_bindings() {
        objects.push(("clusterrolebindings", to_value(serde_json::to_value(b))?));
    }
    for b in bootstrap::role_bindings() {
        objects.push(("rolebindings", to_value(serde_json::to_value(b))?));
    }
    for (plural, mut want) in objects {
        let rt = berth_api::registry::lookup("rbac.authorization.k8s.io", "v1", plural)
            .context("RBAC resources not registered")?;
        if let Some(m) = want.as_object_mut() {
            m.insert("apiVersion".into(), json!("rbac.authorization.k8s.io/v1"));
            m.insert("kind".into(), json!(rt.kind));
        }
        let name = crate::objects::name(&want).unwrap_or_default().to_string();
        let ns = crate::objects::namespace(&want).map(String::from);
        let rp = crate::request::ResourcePath {
            rt,
            namespace: ns.clone(),
            name: None,
            subresource: None,
            legacy_watch: false,
        };
        let q = crate::request::Query::default();
        let existing = rest
            .store
            .get(&crate::objects::key(rt, ns.as_deref(), &name))
            .await?;
        let Some(kv) = existing else {
            match rest.create(&rp, want, &q).await {
                Ok(_) => {}
                Err(e) if e.code == 409 => {}
                Err(e) => anyhow::bail!("creating {plural} {name}: {e}"),
            }
            continue;
        };
        let have = crate::objects::decode(&kv)
            .map_err(|e| anyhow::anyhow!("decoding {plural} {name}: {e}"))?;
        let Some(merged) = reconciled(&have, &want) else {
            continue;
        };
        let rp = crate::request::ResourcePath {
            name: Some(name.clone()),
            ..rp
        };
        match rest.update(&rp, merged, &q).await {
            Ok(_) => {}
            // Someone else (another server) reconciled it at the same time.
            Err(e) if e.code == 409 => {}
            Err(e) => anyhow::bail!("reconciling {plural} {name}: {e}"),
        }
    }
    Ok(())
}

/// `have` with what `want` has and it lacks, or None when nothing is
/// missing or reconciliation is turned off for it.
fn reconciled(have: &Value, want: &Value) -> Option<Value> {
    const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
    if have
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(AUTOUPDATE))
        .and_then(Value::as_str)
        == Some("false")
    {
        return None;
    }
    let mut out = have.clone();
    for part in ["labels", "annotations"] {
        let Some(w) = want
            .pointer(&format!("/metadata/{part}"))
            .and_then(Value::as_object)
        else {
            continue;
        };
        let meta = out.get_mut("metadata")?.as_object_mut()?;
        let h = meta.entry(part).or_insert_with(|| json!({}));
        if !h.is_object() {
            *h = json!({});
        }
        let h = h.as_object_mut()?;
        for (k, v) in w {
            if !h.contains_key(k) {
                h.insert(k.clone(), v.clone());
            }
        }
    }
    // Aggregated roles' rules belong to the aggregation controller.
    let lists: &[&str] = if want.get("aggregationRule").is_some_and(|a| !a.is_null()) {
        out["aggregationRule"] = want["aggregationRule"].clone();
        &["subjects"]
    } else {
        &["rules", "subjects"]
    };
    for list in lists {
        let Some(w) = want.get(*list).and_then(Value::as_array) else {
            continue;
        };
        let h = out
            .as_object_mut()?
            .entry(*list)
            .or_insert_with(|| json!([]));
        if !h.is_array() {
            *h = json!([]);
        }
        let h = h.as_array_mut()?;
        for item in w {
            if !h.contains(item) {
                h.push(item.clone());
            }
        }
    }
    (out != *have).then_some(out)
}

/// Creates or refreshes kube-system's `extension-apiserver-authentication`
/// ConfigMap (what aggregated API servers read to trust the front proxy).
pub async fn extension_apiserver_authentication(rest: &Rest, want: Value) -> Result<()> {
    let rt =
        berth_api::registry::lookup("", "v1", "configmaps").context("configmaps not registered")?;
    let name = "extension-apiserver-authentication";
    let rp = crate::request::ResourcePath {
        rt,
        namespace: Some("kube-system".into()),
        name: None,
        subresource: None,
        legacy_watch: false,
    };
    let key = crate::objects::key(rt, Some("kube-system"), name);
    match rest.store.get(&key).await? {
        None => match rest
            .create(&rp, want, &crate::request::Query::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.code == 409 => Ok(()),
            Err(e) => anyhow::bail!("creating {name}: {e}"),
        },
        Some(kv) => {
            let cur = crate::objects::decode(&kv).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            if cur.get("data") == want.get("data") {
                return Ok(());
            }
            let mut next = cur;
            next["data"] = want["data"].clone();
            let one = crate::request::ResourcePath {
                name: Some(name.into()),
                ..rp
            };
            rest.update(&one, next, &crate::request::Query::default())
                .await
                .map(|_| ())
                .map_err(|e| anyhow::anyhow!("updating {name}: {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconciliation_adds_only_what_is_missing() {
        let want = json!({"metadata": {"name": "view", "labels": {"a": "1"}, "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]});
        let same = want.clone();
        assert_eq!(reconciled(&same, &want), None);
        let extra = json!({"metadata": {"name": "view", "labels": {"a": "1", "b": "2"}, "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]}]});
        assert_eq!(
            reconciled(&extra, &want),
            None,
            "extra rules and labels stay"
        );
        let stripped = json!({"metadata": {"name": "view"}, "rules": []});
        let fixed = reconciled(&stripped, &want).unwrap();
        assert_eq!(fixed["rules"], want["rules"]);
        assert_eq!(fixed["metadata"]["labels"], json!({"a": "1"}));
        let frozen = json!({"metadata": {"name": "view", "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "false"}}, "rules": []});
        assert_eq!(reconciled(&frozen, &want), None);
        let agg_want = json!({"metadata": {"name": "admin"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}, "rules": []});
        let agg_have = json!({"metadata": {"name": "admin"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]},
            "rules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]});
        assert_eq!(
            reconciled(&agg_have, &agg_want),
            None,
            "aggregated rules are the controller's"
        );
    }
}
