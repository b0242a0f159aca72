//! The ClusterRole aggregation controller (upstream's
//! `pkg/controller/clusterroleaggregation`): a ClusterRole with an
//! `aggregationRule` gets as its `rules` the rules of every other ClusterRole
//! its `clusterRoleSelectors` match (this is how `admin`, `edit` and `view`
//! pick up the rules of roles labelled `rbac.authorization.k8s.io/aggregate-to-*`).
//!
//! As upstream, any ClusterRole change re-computes every aggregated role (the
//! set is small and the dependencies unknown), and a role is written only
//! when its rules differ. The computation (`berth_authz::aggregate`, the authorizer's own, and
//! [`updates`]) is pure; the loop reads one reflector of ClusterRoles.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::{Api, PostParams};
use tokio::sync::Notify;
use tracing::{info, warn};

/// How long a failed write waits before every role is computed again.
const RETRY: Duration = Duration::from_secs(5);

fn same_rules(a: &[PolicyRule], b: &[PolicyRule]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| berth_authz::rules_equal(x, y))
}

/// Every aggregated ClusterRole whose rules differ from what it aggregates,
/// with its new rules, by name.
pub fn updates(all: &[ClusterRole]) -> Vec<(ClusterRole, Vec<PolicyRule>)> {
    let mut out: Vec<(ClusterRole, Vec<PolicyRule>)> = all
        .iter()
        .filter_map(|role| {
            let want = berth_authz::aggregate(role, all)?;
            let have = role.rules.as_deref().unwrap_or_default();
            (!same_rules(have, &want)).then(|| (role.clone(), want))
        })
        .collect();
    out.sort_by(|a, b| a.0.metadata.name.cmp(&b.0.metadata.name));
    out
}

/// Runs the controller until the process ends.
pub async fn run(client: kube::Client) {
    let changed = Arc::new(Notify::new());
    let (store, _task) =
        berth_runtime::reflect::notifying_store::<ClusterRole>(&client, changed.clone());
    if store.wait_until_ready().await.is_err() {
        return;
    }
    let api: Api<ClusterRole> = Api::all(client);
    loop {
        let all: Vec<ClusterRole> = store.state().iter().map(|r| (**r).clone()).collect();
        let mut failed = false;
        for (mut role, rules) in updates(&all) {
            let name = role.metadata.name.clone().unwrap_or_default();
            // Guarded by the cached resourceVersion: a role changed meanwhile
            // is a conflict, and its watch event computes it again.
            role.rules = (!rules.is_empty()).then_some(rules);
            match api.replace(&name, &PostParams::default(), &role).await {
                Ok(_) => info!(clusterrole = %name, "aggregated rules updated"),
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                // Someone (the API server's bootstrap reconciliation, at start)
                // wrote the role meanwhile: an ordinary retry, not a warning.
                Err(kube::Error::Api(e)) if e.code == 409 => {
                    tracing::debug!(clusterrole = %name, "aggregated role changed meanwhile; retrying");
                    failed = true;
                }
                Err(e) => {
                    warn!(clusterrole = %name, error = %e, "updating aggregated rules failed; retrying");
                    failed = true;
                }
            }
        }
        if failed {
            tokio::select! {
                _ = changed.notified() => {}
                _ = tokio::time::sleep(RETRY) => {}
            }
        } else {
            changed.notified().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn role(v: serde_json::Value) -> ClusterRole {
        serde_json::from_value(v).unwrap()
    }

    fn rule(v: serde_json::Value) -> PolicyRule {
        serde_json::from_value(v).unwrap()
    }

    fn get_pods() -> serde_json::Value {
        json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]})
    }

    fn list_deploys() -> serde_json::Value {
        json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]})
    }

    fn healthz() -> serde_json::Value {
        json!({"nonResourceURLs": ["/healthz"], "verbs": ["get"]})
    }

    fn sources() -> Vec<ClusterRole> {
        vec![
            role(
                json!({"metadata": {"name": "b-pods", "labels": {"agg": "view", "tier": "1"}},
                "rules": [get_pods()]}),
            ),
            role(
                json!({"metadata": {"name": "a-deploys", "labels": {"agg": "view"}},
                "rules": [list_deploys(), get_pods()]}),
            ),
            role(
                json!({"metadata": {"name": "c-health", "labels": {"agg": "edit"}},
                "rules": [healthz()]}),
            ),
            role(json!({"metadata": {"name": "d-unlabelled"},
                "rules": [json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]})]})),
        ]
    }

    #[test]
    fn aggregation_table() {
        let secrets = json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["*"]});
        // (aggregationRule, rules it aggregates)
        let cases = [
            (
                json!({"clusterRoleSelectors": [{"matchLabels": {"agg": "view"}}]}),
                // By role name: a-deploys before b-pods; get pods once.
                vec![list_deploys(), get_pods()],
            ),
            (
                json!({"clusterRoleSelectors": [
                    {"matchLabels": {"agg": "edit"}}, {"matchLabels": {"agg": "view"}}]}),
                // Selectors in order, then names.
                vec![healthz(), list_deploys(), get_pods()],
            ),
            (
                json!({"clusterRoleSelectors": [{"matchExpressions": [
                    {"key": "agg", "operator": "In", "values": ["edit", "view"]}]}]}),
                vec![list_deploys(), get_pods(), healthz()],
            ),
            (
                json!({"clusterRoleSelectors": [{"matchExpressions": [
                    {"key": "agg", "operator": "NotIn", "values": ["view"]}]}]}),
                vec![healthz(), secrets.clone()],
            ),
            (
                json!({"clusterRoleSelectors": [{"matchExpressions": [
                    {"key": "tier", "operator": "Exists"}]}]}),
                vec![get_pods()],
            ),
            (
                json!({"clusterRoleSelectors": [{"matchExpressions": [
                    {"key": "agg", "operator": "DoesNotExist"}]}]}),
                vec![secrets.clone()],
            ),
            (
                json!({"clusterRoleSelectors": [{"matchLabels": {"agg": "view"},
                    "matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}]}),
                vec![list_deploys(), get_pods()],
            ),
            // An empty selector matches every other ClusterRole, as upstream's.
            (
                json!({"clusterRoleSelectors": [{}]}),
                vec![list_deploys(), get_pods(), healthz(), secrets.clone()],
            ),
            (
                json!({"clusterRoleSelectors": [{"matchLabels": {"agg": "none"}}]}),
                vec![],
            ),
            (json!({}), vec![]),
        ];
        for (agg, want) in cases {
            let mut all = sources();
            all.push(role(
                json!({"metadata": {"name": "view", "labels": {"agg": "view"}},
                "aggregationRule": agg.clone(), "rules": [json!({"verbs": ["own"]})]}),
            ));
            let got = berth_authz::aggregate(&all[all.len() - 1], &all).unwrap();
            let want: Vec<PolicyRule> = want.into_iter().map(rule).collect();
            // Its own rules never count, though it matches its selector.
            assert_eq!(got, want, "{agg}");
        }
        assert_eq!(berth_authz::aggregate(&sources()[0], &sources()), None);
    }

    #[test]
    fn updates_only_when_rules_differ() {
        let agg = json!({"clusterRoleSelectors": [{"matchLabels": {"agg": "edit"}}]});
        let healthz_empty_lists = json!({"apiGroups": [], "resources": [], "nonResourceURLs": ["/healthz"], "verbs": ["get"]});
        // (the aggregated role's current rules, new rules if it must be written)
        let cases = [
            (json!(null), Some(vec![healthz()])),
            (json!([]), Some(vec![healthz()])),
            (json!([healthz()]), None),
            // Empty and absent lists are the same rule (upstream's Semantic.DeepEqual).
            (json!([healthz_empty_lists]), None),
            (json!([healthz(), get_pods()]), Some(vec![healthz()])),
            (json!([get_pods()]), Some(vec![healthz()])),
        ];
        for (rules, want) in cases {
            let mut all = sources();
            all.push(role(
                json!({"metadata": {"name": "edit"}, "aggregationRule": agg, "rules": rules}),
            ));
            let got: Vec<(String, Vec<PolicyRule>)> = updates(&all)
                .into_iter()
                .map(|(r, rules)| (r.metadata.name.unwrap_or_default(), rules))
                .collect();
            let want: Vec<(String, Vec<PolicyRule>)> = want
                .into_iter()
                .map(|w| ("edit".to_string(), w.into_iter().map(rule).collect()))
                .collect();
            assert_eq!(got, want, "{rules}");
        }
    }

    #[test]
    fn nested_aggregation_settles() {
        // admin aggregates edit, which aggregates view's source: the first
        // pass gives edit its rules, the next (edit's own change) gives admin.
        let mut all = sources();
        all.push(role(
            json!({"metadata": {"name": "edit", "labels": {"agg": "admin"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "edit"}}]}}),
        ));
        all.push(role(json!({"metadata": {"name": "admin"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"agg": "admin"}}]}})));
        let mut passes = 0;
        loop {
            let ups = updates(&all);
            if ups.is_empty() {
                break;
            }
            passes += 1;
            assert!(passes < 5, "does not settle");
            for (r, rules) in ups {
                let name = r.metadata.name.clone();
                if let Some(x) = all.iter_mut().find(|x| x.metadata.name == name) {
                    x.rules = Some(rules);
                }
            }
        }
        assert_eq!(passes, 2);
        let admin = all
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some("admin"));
        assert_eq!(
            admin.and_then(|r| r.rules.clone()),
            Some(vec![rule(healthz())])
        );
    }
}
