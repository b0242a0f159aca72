//! `POST pods/<name>/eviction` (upstream's EvictionREST,
//! `pkg/registry/core/pod/storage/eviction.go`): a policy/v1 (or v1beta1)
//! Eviction deletes the pod unless that would break its PodDisruptionBudget.
//!
//! Terminal, pending and terminating pods are deleted without a budget check.
//! Otherwise the one PDB selecting the pod (two or more: 500) must allow a
//! disruption: its `disruptionsAllowed` is decremented and the pod recorded in
//! `disruptedPods` (a guarded write, decided again on conflict), or the answer
//! is 429 with the `DisruptionBudget` cause. A not-Ready pod goes without
//! spending the budget when `unhealthyPodEvictionPolicy: AlwaysAllow`, or when
//! the budget is met (IfHealthyBudget, the default) — then with a
//! resourceVersion precondition, so a pod turning Ready meanwhile is a 429.
//! The pod gets the `DisruptionTarget` condition (`EvictionByEvictionAPI`)
//! before it is deleted with the Eviction's `deleteOptions`; `dryRun` changes
//! neither the PDB nor the pod.

use super::*;

/// Upstream's `MaxDisruptedPodSize`: more unconfirmed evictions than this and
/// the budget refuses new ones until the disruption controller catches up.
pub const MAX_DISRUPTED_POD_SIZE: usize = 2000;

/// Upstream's `EvictionsRetry` steps: how often a conflicting write is retried.
const EVICTION_RETRIES: usize = 20;

const VIOLATES_BUDGET: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// The PodDisruptionBudget condition type, reasons and the eviction condition.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";
pub const SUFFICIENT_PODS: &str = "SufficientPods";
pub const INSUFFICIENT_PODS: &str = "InsufficientPods";

/// A 429 TooManyRequests with upstream's `DisruptionBudget` cause; a
/// non-zero `retry_after` becomes `retryAfterSeconds` (and a `Retry-After` header).
fn too_many_requests(cause: String, retry_after: u32) -> ApiError {
    let mut e = ApiError::new(429, "TooManyRequests", VIOLATES_BUDGET);
    let mut details = json!({"causes": [{"reason": "DisruptionBudget", "message": cause}]});
    if retry_after > 0 {
        details["retryAfterSeconds"] = json!(retry_after);
    }
    e.details = Some(details);
    e
}

/// Upstream's `createTooManyRequestsError`: the budget has not been computed
/// for its current generation yet (or a not-Ready pod turned Ready meanwhile).
fn still_processing(pdb_name: &str) -> ApiError {
    too_many_requests(
        format!("The disruption budget {pdb_name} is still being processed by the server."),
        10,
    )
}

/// Upstream's `NewForbidden(policy.Resource("poddisruptionbudget"), …)`.
fn pdb_forbidden(pdb_name: &str, why: &str) -> ApiError {
    let mut e = ApiError::forbidden(format!(
        "poddisruptionbudget.policy \"{pdb_name}\" is forbidden: {why}"
    ));
    e.details = Some(json!({"name": pdb_name, "group": "policy", "kind": "poddisruptionbudget"}));
    e
}

fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Upstream's `canIgnorePDB`: terminal, pending and terminating pods are
/// deleted without looking at budgets.
pub fn can_ignore_pdb(pod: &Value) -> bool {
    matches!(phase(pod), "Succeeded" | "Failed" | "Pending") || objects::is_deleting(pod)
}

/// Upstream's `shouldEnforceResourceVersion`: a pod that may still turn Ready
/// is deleted only at the version the decision saw.
pub fn should_enforce_resource_version(pod: &Value) -> bool {
    !(matches!(phase(pod), "Succeeded" | "Failed") || objects::is_deleting(pod))
}

/// `podutil.IsPodReady`: the Ready condition is True.
pub fn is_pod_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

/// Whether `pdb` (in the pod's namespace) selects `pod`: policy/v1's
/// `LabelSelectorAsSelector` (null selects nothing, empty everything; an
/// invalid selector selects nothing).
pub fn pdb_selects(pdb: &Value, pod: &Value) -> bool {
    let sel = pdb
        .pointer("/spec/selector")
        .cloned()
        .unwrap_or(Value::Null);
    berth_api::selector::LabelSelector::from_meta(&sel).is_ok_and(|s| s.matches_object(pod))
}

fn status_int(pdb: &Value, field: &str) -> i64 {
    pdb.get("status")
        .and_then(|s| s.get(field))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// What to do with a not-Ready pod under a budget (upstream's branch before
/// `checkAndDecrement`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unhealthy {
    /// Delete it without spending the budget (at the pod's resourceVersion).
    DeleteAtVersion,
    /// Spend the budget as for a Ready pod.
    CheckBudget,
}

/// `unhealthyPodEvictionPolicy`: AlwaysAllow deletes any not-Ready pod;
/// IfHealthyBudget (the default) only while the budget is met.
pub fn unhealthy_decision(pdb: &Value) -> Unhealthy {
    let policy = pdb
        .pointer("/spec/unhealthyPodEvictionPolicy")
        .and_then(Value::as_str);
    if policy == Some("AlwaysAllow") {
        return Unhealthy::DeleteAtVersion;
    }
    let (current, desired) = (
        status_int(pdb, "currentHealthy"),
        status_int(pdb, "desiredHealthy"),
    );
    if current >= desired && desired > 0 {
        Unhealthy::DeleteAtVersion
    } else {
        Unhealthy::CheckBudget
    }
}

/// Upstream's `UpdateDisruptionAllowedCondition` (component-helpers): the
/// `DisruptionAllowed` condition from `disruptionsAllowed`, its transition
/// time kept unless its status changes (`meta.SetStatusCondition`).
pub fn update_disruption_allowed_condition(pdb: &mut Value, now: &str) {
    let allowed = status_int(pdb, "disruptionsAllowed") > 0;
    let (status, reason) = if allowed {
        ("True", SUFFICIENT_PODS)
    } else {
        ("False", INSUFFICIENT_PODS)
    };
    let generation = status_int(pdb, "observedGeneration");
    set_status_condition(pdb, DISRUPTION_ALLOWED, status, reason, "", generation, now);
}

/// `meta.SetStatusCondition` on `status.conditions`.
pub fn set_status_condition(
    obj: &mut Value,
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
    observed_generation: i64,
    now: &str,
) {
    if !obj["status"].is_object() {
        obj["status"] = json!({});
    }
    if !obj["status"]["conditions"].is_array() {
        obj["status"]["conditions"] = json!([]);
    }
    let Some(list) = obj["status"]["conditions"].as_array_mut() else {
        return;
    };
    let mut cond = json!({
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": observed_generation,
        "lastTransitionTime": now,
    });
    if let Some(old) = list
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
    {
        if old.get("status").and_then(Value::as_str) == Some(status)
            && let Some(t) = old.get("lastTransitionTime")
        {
            cond["lastTransitionTime"] = t.clone();
        }
        *old = cond;
    } else {
        list.push(cond);
    }
}

/// Upstream's `checkAndDecrement` on the PDB as stored: the budget must be
/// computed for its generation and allow a disruption; the result has one
/// disruption fewer and, unless `dry_run`, the pod in `disruptedPods` at `now`.
pub fn check_and_decrement(
    mut pdb: Value,
    pod_name: &str,
    now: &str,
    dry_run: bool,
) -> ApiResult<Value> {
    let name = objects::name(&pdb).unwrap_or("").to_string();
    let generation = pdb
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if status_int(&pdb, "observedGeneration") < generation {
        return Err(still_processing(&name));
    }
    let allowed = status_int(&pdb, "disruptionsAllowed");
    if allowed < 0 {
        return Err(pdb_forbidden(&name, "pdb disruptions allowed is negative"));
    }
    let disrupted = pdb
        .pointer("/status/disruptedPods")
        .and_then(Value::as_object)
        .map_or(0, |m| m.len());
    if disrupted > MAX_DISRUPTED_POD_SIZE {
        return Err(pdb_forbidden(
            &name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(too_many_requests(
            format!(
                "The disruption budget {name} needs {} healthy pods and has {} currently",
                status_int(&pdb, "desiredHealthy"),
                status_int(&pdb, "currentHealthy")
            ),
            0,
        ));
    }
    if !pdb["status"].is_object() {
        pdb["status"] = json!({});
    }
    pdb["status"]["disruptionsAllowed"] = json!(allowed - 1);
    if allowed - 1 == 0 {
        update_disruption_allowed_condition(&mut pdb, now);
    }
    if dry_run {
        return Ok(pdb);
    }
    if !pdb["status"]["disruptedPods"].is_object() {
        pdb["status"]["disruptedPods"] = json!({});
    }
    pdb["status"]["disruptedPods"][pod_name] = json!(now);
    Ok(pdb)
}

/// Upstream's `propagateDryRun`: the request's `dryRun` and the delete
/// options' must agree; either one given applies to both.
fn propagate_dry_run(options: &mut Value, query: Option<&str>) -> ApiResult<()> {
    let from_query: Vec<String> = query.map(|q| vec![q.to_string()]).unwrap_or_default();
    let in_body = objects::strings(options.get("dryRun"));
    if in_body.is_empty() {
        if !from_query.is_empty() {
            options["dryRun"] = json!(from_query);
        }
        return Ok(());
    }
    if from_query.is_empty() || from_query == in_body {
        return Ok(());
    }
    Err(ApiError::internal(format!(
        "Non-matching dry-run options in request and content: [{}] and [{}]",
        from_query.join(" "),
        in_body.join(" ")
    )))
}

fn precondition_rv(options: &Value) -> Option<&str> {
    options
        .pointer("/preconditions/resourceVersion")
        .and_then(Value::as_str)
}

fn set_precondition_rv(options: &mut Value, rv: &str) {
    if !options["preconditions"].is_object() {
        options["preconditions"] = json!({});
    }
    options["preconditions"]["resourceVersion"] = json!(rv);
}

fn is_dry_run(options: &Value) -> bool {
    objects::strings(options.get("dryRun"))
        .iter()
        .any(|d| d == "All")
}

/// A conflict worded as upstream's `NewConflict(Resource("Pod"), …)`.
fn pod_conflict(name: &str, why: String) -> ApiError {
    let mut e = ApiError::new(
        409,
        "Conflict",
        format!("Operation cannot be fulfilled on Pod \"{name}\": {why}"),
    );
    e.details = Some(json!({"name": name, "kind": "Pod"}));
    e
}

/// The `DisruptionTarget` condition an eviction adds (upstream's
/// `UpdatePodCondition`: the transition time moves only with the status).
/// False when the pod already carries it.
pub fn add_disruption_target(pod: &mut Value, now: &str) -> bool {
    let cond = json!({
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
        "lastProbeTime": null,
        "lastTransitionTime": now,
    });
    let existing = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("DisruptionTarget"))
        })
        .cloned();
    let mut cond = cond;
    if let Some(old) = &existing {
        let same = |k: &str| old.get(k) == cond.get(k);
        if same("status") && same("reason") && same("message") {
            return false;
        }
        if same("status")
            && let Some(t) = old.get("lastTransitionTime")
        {
            cond["lastTransitionTime"] = t.clone();
        }
    }
    set_condition(pod, cond);
    true
}

impl Rest {
    /// `POST pods/<name>/eviction`.
    pub async fn evict(&self, rp: &ResourcePath, body: Value, q: &Query) -> ApiResult<Reply> {
        let rt = rp.rt;
        let name = name_of(rp)?.to_string();
        let ns = ns_of(rp).map(String::from);
        let mut eviction = body;
        if !eviction.is_object() {
            return Err(ApiError::bad_request("the body must be an Eviction object"));
        }
        match eviction.get("apiVersion").and_then(Value::as_str) {
            None | Some("policy/v1") | Some("policy/v1beta1") => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({other}) does not match the expected API version (policy/v1)"
                )));
            }
        }
        match eviction.get("kind").and_then(Value::as_str) {
            None | Some("Eviction") => {}
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "the kind in the data ({other}) does not match the expected kind (Eviction)"
                )));
            }
        }
        if let (Some(url_ns), Some(body_ns)) = (ns.as_deref(), objects::namespace(&eviction))
            && !body_ns.is_empty()
            && body_ns != url_ns
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let dry_run_query = q.dry_run()?;
        let attrs = admission::Attributes {
            operation: admission::Operation::Create,
            rt,
            subresource: Some("eviction"),
            namespace: ns.as_deref(),
            name: &name,
            user: q.user.as_ref(),
            old: None,
            dry_run: dry_run_query,
        };
        self.admission.admit(self, &attrs, &mut eviction).await?;
        if objects::name(&eviction) != Some(name.as_str()) {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
        let mut options = match eviction.get("deleteOptions") {
            Some(o @ Value::Object(_)) => o.clone(),
            _ => json!({}),
        };
        propagate_dry_run(&mut options, q.get("dryRun"))?;
        // The options must be valid before anything is changed.
        delete::DeleteOptions::from(Some(&options), &Query::parse(None))?;
        self.admission
            .validate(self, &attrs, Some(&eviction))
            .await?;
        let dry_run = is_dry_run(&options);
        let at = At {
            rt,
            ns: ns.as_deref(),
            name: &name,
        };
        let main = ResourcePath {
            subresource: None,
            ..rp.clone()
        };
        let user_rv = precondition_rv(&options).map(String::from);

        // Pods that may go without a budget check: deleted at once.
        let mut pod = None;
        for _ in 0..EVICTION_RETRIES {
            let current = self.current_for_write(&at, false).await?.obj;
            if !can_ignore_pdb(&current) {
                pod = Some(current);
                break;
            }
            let mut opts = options.clone();
            if should_enforce_resource_version(&current) && user_rv.is_none() {
                set_precondition_rv(&mut opts, objects::resource_version(&current).unwrap_or(""));
            }
            match self
                .add_condition_and_delete(&main, &name, opts, dry_run, q)
                .await
            {
                Ok(()) => return Ok(evicted()),
                Err(e) if e.code == 409 && user_rv.is_none() => continue,
                Err(e) => return Err(e),
            }
        }
        let Some(pod) = pod else {
            return Err(ApiError::conflict(rt, &name));
        };

        let pdbs = self.pdbs_selecting(&pod).await?;
        if pdbs.len() > 1 {
            return Ok(Reply {
                code: 500,
                body: json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                    "code": 500}),
                warnings: Vec::new(),
            });
        }
        let mut at_version = false;
        let mut pdb_name = String::new();
        if let Some(pdb) = pdbs.into_iter().next() {
            pdb_name = objects::name(&pdb).unwrap_or("").to_string();
            if !is_pod_ready(&pod) && unhealthy_decision(&pdb) == Unhealthy::DeleteAtVersion {
                at_version = true;
            } else if dry_run {
                check_and_decrement(pdb, &name, &objects::now_rfc3339(), true)?;
            } else {
                self.decrement_budget(&pdb, &name).await?;
            }
        }
        let mut opts = options.clone();
        if at_version {
            set_precondition_rv(&mut opts, objects::resource_version(&pod).unwrap_or(""));
        }
        match self
            .add_condition_and_delete(&main, &name, opts, dry_run, q)
            .await
        {
            Ok(()) => Ok(evicted()),
            // The pod changed since the decision (it may be Ready now): try again.
            Err(e) if e.code == 409 && at_version && user_rv.is_none() => {
                Err(still_processing(&pdb_name))
            }
            Err(e) => Err(e),
        }
    }

    /// The PodDisruptionBudgets in the pod's namespace that select it.
    async fn pdbs_selecting(&self, pod: &Value) -> ApiResult<Vec<Value>> {
        let pdb_rt = berth_api::registry::lookup("policy", "v1", "poddisruptionbudgets")
            .ok_or_else(|| ApiError::internal("no poddisruptionbudgets resource"))?;
        let resp = self
            .store
            .range(RangeRequest {
                prefix: objects::list_prefix(pdb_rt, objects::namespace(pod)),
                ..Default::default()
            })
            .await?;
        let mut out = Vec::new();
        for kv in &resp.kvs {
            let pdb = objects::decode(kv)?;
            if pdb_selects(&pdb, pod) {
                out.push(pdb);
            }
        }
        Ok(out)
    }

    /// Spends one disruption of `pdb` on `pod_name` through its status
    /// subresource: a guarded write, re-decided on the latest PDB after a
    /// conflict (upstream's RetryOnConflict around checkAndDecrement).
    async fn decrement_budget(&self, pdb: &Value, pod_name: &str) -> ApiResult<()> {
        let pdb_rt = berth_api::registry::lookup("policy", "v1", "poddisruptionbudgets")
            .ok_or_else(|| ApiError::internal("no poddisruptionbudgets resource"))?;
        let pdb_name = objects::name(pdb).unwrap_or("").to_string();
        let status_rp = ResourcePath {
            rt: pdb_rt,
            namespace: objects::namespace(pdb).map(String::from),
            name: Some(pdb_name.clone()),
            subresource: Some("status".into()),
            legacy_watch: false,
        };
        let opts = WriteOpts {
            precondition: None,
            dry_run: false,
            managed: Managed::Update {
                manager: "kube-apiserver".into(),
                subresource: Some("status".into()),
            },
            user: None,
        };
        let now = objects::now_rfc3339();
        match self
            .write(&status_rp, &pdb_name, &opts, |cur| {
                check_and_decrement(cur, pod_name, &now, false)
            })
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.code == 409 => {
                let mut e = ApiError::timeout(format!(
                    "Timeout: couldn't update PodDisruptionBudget \"{pdb_name}\" due to conflicts"
                ));
                e.details = Some(json!({"retryAfterSeconds": 10}));
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Upstream's `addConditionAndDeletePod`: unless a dry run, the pod gets
    /// the `DisruptionTarget` condition (checked against the preconditions,
    /// which then name the new version), and is deleted with `options`.
    async fn add_condition_and_delete(
        &self,
        main: &ResourcePath,
        name: &str,
        mut options: Value,
        dry_run: bool,
        q: &Query,
    ) -> ApiResult<()> {
        if !dry_run {
            let uid = options
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .filter(|u| !u.is_empty())
                .map(String::from);
            let rv = precondition_rv(&options)
                .filter(|r| !r.is_empty())
                .map(String::from);
            let now = objects::now_rfc3339();
            let pod_name = name.to_string();
            let updated = self
                .write_raw(main, name, |mut pod| {
                    if let Some(uid) = &uid {
                        let have = objects::meta_str(&pod, "uid").unwrap_or("");
                        if have != uid {
                            return Err(pod_conflict(&pod_name, format!("the UID in the precondition ({uid}) does not match the UID in record ({have}). The object might have been deleted and then recreated")));
                        }
                    }
                    if let Some(rv) = &rv {
                        let have = objects::resource_version(&pod).unwrap_or("");
                        if have != rv {
                            return Err(pod_conflict(&pod_name, format!("the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({have}). The object might have been modified")));
                        }
                    }
                    add_disruption_target(&mut pod, &now);
                    Ok(pod)
                })
                .await?;
            if rv.is_some() {
                let new_rv = objects::resource_version(&updated)
                    .unwrap_or("")
                    .to_string();
                set_precondition_rv(&mut options, &new_rv);
            }
        }
        let mut dq = Query::parse(None);
        dq.user = q.user.clone();
        self.delete_with(main, Some(options), &dq, delete::Admission::Skip)
            .await?;
        Ok(())
    }
}

/// Upstream's answer to a successful eviction (201 from the create handler).
fn evicted() -> Reply {
    Reply {
        code: 201,
        body: json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
        warnings: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
