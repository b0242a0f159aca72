//! PodSecurity: upstream's Pod Security Admission (`k8s.io/pod-security-admission/admission`)
//! over [`berth_podsecurity`]. Namespaces choose their policy with the
//! `pod-security.kubernetes.io/enforce|audit|warn[-version]` labels, over the
//! cluster defaults of the `PodSecurityConfiguration`
//! (`--admission-control-config-file`).
//!
//! - Pods, on create and on the updates upstream evaluates (a container
//!   added or an image changed; not the `status`, `binding`, `eviction` or
//!   streaming subresources): `enforce` refuses with 403, `warn` adds a
//!   Warning header, `audit` an audit annotation.
//! - Pod templates of the workload kinds: `warn` and `audit` only, never
//!   refused, so a Deployment is created and its pods are refused instead.
//! - Namespaces: invalid labels are refused (422); a stricter enforce level
//!   warns about the existing pods that violate it.
//!
//! Exempt usernames, namespaces and runtime classes are never evaluated.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use berth_podsecurity::api::{
    AUDIT_LEVEL_LABEL, AUDIT_VERSION_LABEL, ENFORCE_LEVEL_LABEL, ENFORCE_VERSION_LABEL,
    LABEL_PREFIX, WARN_LEVEL_LABEL, WARN_VERSION_LABEL, aggregate,
};
use berth_podsecurity::{
    Evaluator, FieldError, Level, LevelVersion, PodSecurityConfiguration, Policy,
    policy_to_evaluate,
};
use serde_json::{Value, json};

use super::{Attributes, Operation, Plugin, forbidden};
use crate::objects;
use crate::rest::Rest;
use crate::status::{ApiError, ApiResult};

/// Upstream's bounds on the existing pods checked when a namespace's enforce
/// level tightens.
const NAMESPACE_MAX_PODS_TO_CHECK: usize = 3000;
const NAMESPACE_POD_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// Pod subresources whose writes are never evaluated (upstream's
/// `ignoredPodSubresources`).
const IGNORED_POD_SUBRESOURCES: &[&str] = &[
    "exec",
    "attach",
    "binding",
    "eviction",
    "log",
    "portforward",
    "proxy",
    "status",
];

pub struct PodSecurity {
    config: PodSecurityConfiguration,
    evaluator: Evaluator,
}

/// Why a request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denial {
    /// 403 `<resource> "<name>" is forbidden: <message>`.
    Forbidden(String),
    /// 422 on a namespace's labels.
    Invalid(Vec<FieldError>),
    /// 500 `Internal error occurred: <message>`.
    Internal(String),
}

/// What one evaluation decided (upstream's `AdmissionResponse`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Response {
    pub denied: Option<Denial>,
    pub warnings: Vec<String>,
    /// Keyed without the `pod-security.kubernetes.io/` prefix, as upstream
    /// keeps them until the plugin hands them to the audit event.
    pub audit_annotations: BTreeMap<String, String>,
}

impl Response {
    fn exempt(reason: &str) -> Self {
        let mut r = Response::default();
        r.audit_annotations.insert("exempt".into(), reason.into());
        r
    }
}

/// The audit annotations of a response, keyed as upstream's audit events
/// carry them: `pod-security.kubernetes.io/enforce-policy`,
/// `pod-security.kubernetes.io/audit-violations`, `pod-security.kubernetes.io/exempt`
/// and `pod-security.kubernetes.io/error`.
pub fn audit_annotations(r: &Response) -> Vec<(String, String)> {
    r.audit_annotations
        .iter()
        .map(|(k, v)| (format!("{LABEL_PREFIX}{k}"), v.clone()))
        .collect()
}

/// Hands the annotations to the request's audit event (upstream's
/// `audit.AddAuditAnnotations`; nothing when the request is not audited).
fn record_audit_annotations(annotations: Vec<(String, String)>) {
    for (key, value) in annotations {
        crate::audit::add_annotation(key, value);
    }
}

/// What a namespace write leads to.
#[derive(Debug, PartialEq, Eq)]
enum NamespaceStep {
    Done(Response),
    /// The enforce level tightened: report the existing pods that violate it.
    CheckPods(LevelVersion),
}

/// The workload kinds whose pod template is evaluated (warn and audit only),
/// with the template's path.
fn template_path(a: &Attributes<'_>) -> Option<&'static str> {
    Some(match (a.rt.group, a.rt.plural) {
        ("", "podtemplates") => "/template",
        ("", "replicationcontrollers") => "/spec/template",
        ("apps", "replicasets" | "deployments" | "statefulsets" | "daemonsets") => "/spec/template",
        ("batch", "jobs") => "/spec/template",
        ("batch", "cronjobs") => "/spec/jobTemplate/spec/template",
        _ => return None,
    })
}

fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    objects::labels(obj)
        .into_iter()
        .filter_map(|(k, v)| v.as_str().map(|v| (k, v.to_string())))
        .collect()
}

/// Upstream's `isSignificantPodUpdate`: a container added or removed, or an
/// image changed. Everything else that may change on a pod is irrelevant.
fn is_significant_pod_update(new: &Value, old: &Value) -> bool {
    fn list<'a>(p: &'a Value, k: &str) -> &'a [Value] {
        p.get("spec")
            .and_then(|s| s.get(k))
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }
    fn image(c: &Value) -> &str {
        c.get("image").and_then(Value::as_str).unwrap_or("")
    }
    for k in ["containers", "initContainers"] {
        let (n, o) = (list(new, k), list(old, k));
        if n.len() != o.len() || n.iter().zip(o).any(|(a, b)| image(a) != image(b)) {
            return true;
        }
    }
    let old_ephemeral = list(old, "ephemeralContainers");
    list(new, "ephemeralContainers").iter().any(|c| {
        let old = old_ephemeral
            .iter()
            .find(|o| o.get("name") == c.get("name"));
        old.is_none_or(|o| image(o) != image(c))
    })
}

impl PodSecurity {
    pub fn new(config: PodSecurityConfiguration) -> Self {
        PodSecurity {
            config,
            evaluator: Evaluator::default(),
        }
    }

    fn exempt_namespace(&self, ns: &str) -> bool {
        !ns.is_empty() && self.config.exemptions.namespaces.iter().any(|n| n == ns)
    }

    fn exempt_user(&self, a: &Attributes<'_>) -> bool {
        a.user.is_some_and(|u| {
            !u.name.is_empty() && self.config.exemptions.usernames.contains(&u.name)
        })
    }

    fn exempt_runtime_class(&self, spec: &Value) -> bool {
        spec.get("runtimeClassName")
            .and_then(Value::as_str)
            .is_some_and(|rc| {
                !rc.is_empty()
                    && self
                        .config
                        .exemptions
                        .runtime_classes
                        .iter()
                        .any(|e| e == rc)
            })
    }

    fn policy(&self, labels: &BTreeMap<String, String>) -> (Policy, Vec<FieldError>) {
        policy_to_evaluate(labels, &self.config.defaults)
    }

    /// Upstream's `EvaluatePod`: enforce (pods only), audit and warn, each
    /// level evaluated once.
    pub fn evaluate_pod(
        &self,
        policy: &Policy,
        policy_errs: &[FieldError],
        meta: &Value,
        spec: &Value,
        enforce: bool,
    ) -> Response {
        if self.exempt_runtime_class(spec) {
            return Response::exempt("runtimeClass");
        }
        let mut r = Response::default();
        if !policy_errs.is_empty() {
            r.audit_annotations.insert(
                "error".into(),
                format!("Failed to parse policy: {}", aggregate(policy_errs)),
            );
        }
        let mut cache: Vec<(LevelVersion, berth_podsecurity::AggregateCheckResult)> = Vec::new();
        let mut result = |lv: LevelVersion| {
            if let Some((_, r)) = cache.iter().find(|(l, _)| *l == lv) {
                return r.clone();
            }
            let res = self.evaluator.evaluate(lv, meta, spec);
            cache.push((lv, res.clone()));
            res
        };
        if enforce {
            r.audit_annotations
                .insert("enforce-policy".into(), policy.enforce.to_string());
            let res = result(policy.enforce);
            if !res.allowed {
                r.denied = Some(Denial::Forbidden(format!(
                    "violates PodSecurity \"{}\": {}",
                    policy.enforce,
                    res.forbidden_detail()
                )));
            }
        }
        let audit = result(policy.audit);
        if !audit.allowed {
            r.audit_annotations.insert(
                "audit-violations".into(),
                format!(
                    "would violate PodSecurity \"{}\": {}",
                    policy.audit,
                    audit.forbidden_detail()
                ),
            );
        }
        // No warnings on a request that is refused anyway.
        if r.denied.is_none() {
            let warn = result(policy.warn);
            if !warn.allowed {
                r.warnings.push(format!(
                    "would violate PodSecurity \"{}\": {}",
                    policy.warn,
                    warn.forbidden_detail()
                ));
            }
        }
        r
    }

    /// Upstream's `exemptNamespaceWarning`: an exempt namespace that sets a
    /// policy is told it is ignored.
    fn exempt_namespace_warning(
        &self,
        ns: &str,
        policy: &Policy,
        labels: &BTreeMap<String, String>,
    ) -> Option<String> {
        if policy.fully_privileged() || policy.equivalent(&self.config.defaults) {
            return None;
        }
        let modes = [
            (
                "enforce",
                policy.enforce,
                ENFORCE_LEVEL_LABEL,
                ENFORCE_VERSION_LABEL,
            ),
            (
                "audit",
                policy.audit,
                AUDIT_LEVEL_LABEL,
                AUDIT_VERSION_LABEL,
            ),
            ("warn", policy.warn, WARN_LEVEL_LABEL, WARN_VERSION_LABEL),
        ];
        let set: Vec<String> = modes
            .iter()
            .filter(|(_, lv, l, v)| {
                lv.level != Level::Privileged
                    && (labels.contains_key(*l) || labels.contains_key(*v))
            })
            .map(|(mode, lv, _, _)| format!("{mode}={lv}"))
            .collect();
        Some(format!(
            "namespace \"{ns}\" is exempt from Pod Security, and the policy ({}) will be ignored",
            set.join(", ")
        ))
    }

    /// Upstream's `ValidateNamespace`, up to the pods' evaluation.
    fn namespace_decision(
        &self,
        op: Operation,
        name: &str,
        new: &BTreeMap<String, String>,
        old: Option<&BTreeMap<String, String>>,
    ) -> NamespaceStep {
        let (new_policy, new_errs) = self.policy(new);
        let exempt_warning = |r: &mut Response| {
            if self.exempt_namespace(name)
                && let Some(w) = self.exempt_namespace_warning(name, &new_policy, new)
            {
                r.warnings.push(w);
            }
        };
        let mut r = Response::default();
        match (op, old) {
            (Operation::Create, _) => {
                if !new_errs.is_empty() {
                    r.denied = Some(Denial::Invalid(new_errs));
                    return NamespaceStep::Done(r);
                }
                exempt_warning(&mut r);
                NamespaceStep::Done(r)
            }
            (Operation::Update, Some(old)) => {
                let (old_policy, old_errs) = self.policy(old);
                // Invalid labels are refused only when they changed, so an
                // old namespace with bad labels can still be updated.
                if !new_errs.is_empty() && (old_errs.is_empty() || new_errs != old_errs) {
                    r.denied = Some(Denial::Invalid(new_errs));
                    return NamespaceStep::Done(r);
                }
                let (n, o) = (new_policy.enforce, old_policy.enforce);
                if n == o
                    || n.level == Level::Privileged
                    || (n.version == o.version && n.level <= o.level)
                {
                    return NamespaceStep::Done(r);
                }
                if self.exempt_namespace(name) {
                    exempt_warning(&mut r);
                    return NamespaceStep::Done(r);
                }
                NamespaceStep::CheckPods(n)
            }
            _ => NamespaceStep::Done(r),
        }
    }

    /// Upstream's `EvaluatePodsInNamespace`: one warning per distinct set of
    /// reasons, naming the first pod (by name) and how many others share it;
    /// one pod per controller first, at most 3000 pods, at most a second.
    pub fn evaluate_pods_in_namespace(
        &self,
        ns: &str,
        enforce: LevelVersion,
        pods: &[Value],
    ) -> Vec<String> {
        let null = Value::Null;
        // Prioritize: pods without a controller and the first of each
        // controller, then the other replicas.
        let mut first = Vec::new();
        let mut rest = Vec::new();
        let mut controllers: Vec<&str> = Vec::new();
        for p in pods {
            if self.exempt_runtime_class(p.get("spec").unwrap_or(&null)) {
                continue;
            }
            let controller = p
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .and_then(|refs| {
                    refs.iter()
                        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
                })
                .and_then(|r| r.get("uid").and_then(Value::as_str));
            match controller {
                Some(uid) if controllers.contains(&uid) => rest.push(p),
                Some(uid) => {
                    controllers.push(uid);
                    first.push(p);
                }
                None => first.push(p),
            }
        }
        first.extend(rest);
        let total = first.len();
        let deadline = Instant::now() + NAMESPACE_POD_CHECK_TIMEOUT;
        let mut checked = total.min(NAMESPACE_MAX_PODS_TO_CHECK);
        // (reasons, first pod name, count), in the order first seen.
        let mut found: Vec<(String, String, usize)> = Vec::new();
        for (i, p) in first.iter().take(checked).enumerate() {
            let meta = p.get("metadata").unwrap_or(&null);
            let r = self
                .evaluator
                .evaluate(enforce, meta, p.get("spec").unwrap_or(&null));
            if !r.allowed {
                let reason = r.forbidden_reason();
                let name = objects::name(p).unwrap_or("").to_string();
                match found.iter_mut().find(|(w, _, _)| *w == reason) {
                    Some((_, first_name, count)) => {
                        if name < *first_name {
                            *first_name = name;
                        }
                        *count += 1;
                    }
                    None => found.push((reason, name, 1)),
                }
            }
            if Instant::now() > deadline {
                checked = i + 1;
                break;
            }
        }
        let mut warnings = Vec::new();
        if checked < total {
            warnings.push(format!(
                "new PodSecurity enforce level only checked against the first {checked} of {total} existing pods"
            ));
        }
        if !found.is_empty() {
            warnings.push(format!(
                "existing pods in namespace \"{ns}\" violate the new PodSecurity enforce level \"{enforce}\""
            ));
        }
        let mut pod_warnings: Vec<String> = found
            .into_iter()
            .map(|(reason, name, count)| match count {
                1 => format!("{name}: {reason}"),
                2 => format!("{name} (and 1 other pod): {reason}"),
                n => format!("{name} (and {} other pods): {reason}", n - 1),
            })
            .collect();
        pod_warnings.sort();
        warnings.extend(pod_warnings);
        warnings
    }

    async fn validate_namespace(
        &self,
        rest: &Rest,
        a: &Attributes<'_>,
        obj: &Value,
    ) -> ApiResult<Response> {
        if a.subresource.is_some() {
            return Ok(Response::default());
        }
        let new = labels_of(obj);
        let old = a.old.map(labels_of);
        match self.namespace_decision(a.operation, a.name, &new, old.as_ref()) {
            NamespaceStep::Done(r) => Ok(r),
            NamespaceStep::CheckPods(enforce) => {
                let pods_rt = berth_api::registry::lookup("", "v1", "pods")
                    .ok_or_else(|| ApiError::internal("no pods"))?;
                let warnings =
                    match super::resource_quota::consistent_list(rest, pods_rt, a.name).await {
                        Ok(pods) => self.evaluate_pods_in_namespace(a.name, enforce, &pods),
                        Err(_) => vec![
                            "failed to list pods while checking new PodSecurity enforce level"
                                .to_string(),
                        ],
                    };
                Ok(Response {
                    warnings,
                    ..Default::default()
                })
            }
        }
    }

    /// The namespace's labels (from the watch cache, else the store).
    async fn namespace_labels(
        &self,
        rest: &Rest,
        ns: &str,
    ) -> Result<BTreeMap<String, String>, String> {
        let ns_rt = berth_api::registry::lookup("", "v1", "namespaces").ok_or("no namespaces")?;
        let key = objects::key(ns_rt, None, ns);
        let found = match rest.cache.get(&key) {
            Some(s) => Some(objects::decode_at(&s.bytes, s.mod_revision).map_err(|e| e.message)?),
            None => match rest.store.get(&key).await.map_err(|e| e.to_string())? {
                Some(kv) => Some(objects::decode(&kv).map_err(|e| e.message)?),
                None => None,
            },
        };
        found
            .map(|n| labels_of(&n))
            .ok_or_else(|| format!("namespaces \"{ns}\" not found"))
    }

    async fn validate_pod(
        &self,
        rest: &Rest,
        a: &Attributes<'_>,
        obj: &Value,
    ) -> ApiResult<Response> {
        if a.subresource
            .is_some_and(|s| IGNORED_POD_SUBRESOURCES.contains(&s))
        {
            return Ok(Response::default());
        }
        let ns = a.namespace.unwrap_or("");
        if self.exempt_namespace(ns) {
            return Ok(Response::exempt("namespace"));
        }
        if self.exempt_user(a) {
            return Ok(Response::exempt("user"));
        }
        let labels = match self.namespace_labels(rest, ns).await {
            Ok(l) => l,
            Err(e) => {
                let mut r = Response {
                    denied: Some(Denial::Internal(format!(
                        "failed to lookup namespace \"{ns}\""
                    ))),
                    ..Default::default()
                };
                r.audit_annotations.insert("error".into(), e);
                return Ok(r);
            }
        };
        let (policy, errs) = self.policy(&labels);
        if errs.is_empty() && policy.fully_privileged() {
            let mut r = Response::default();
            r.audit_annotations.insert(
                "enforce-policy".into(),
                LevelVersion::PRIVILEGED.to_string(),
            );
            return Ok(r);
        }
        if a.operation == Operation::Update
            && let Some(old) = a.old
            && !is_significant_pod_update(obj, old)
        {
            return Ok(Response::default());
        }
        let null = Value::Null;
        let meta = obj.get("metadata").unwrap_or(&null);
        let spec = obj.get("spec").unwrap_or(&null);
        Ok(self.evaluate_pod(&policy, &errs, meta, spec, true))
    }

    async fn validate_pod_controller(
        &self,
        rest: &Rest,
        a: &Attributes<'_>,
        obj: &Value,
        template: &str,
    ) -> ApiResult<Response> {
        if a.subresource.is_some() {
            return Ok(Response::default());
        }
        let ns = a.namespace.unwrap_or("");
        if self.exempt_namespace(ns) {
            return Ok(Response::exempt("namespace"));
        }
        if self.exempt_user(a) {
            return Ok(Response::exempt("user"));
        }
        let labels = match self.namespace_labels(rest, ns).await {
            Ok(l) => l,
            Err(e) => {
                let mut r = Response::default();
                r.audit_annotations.insert(
                    "error".into(),
                    format!("failed to lookup namespace \"{ns}\": {e}"),
                );
                return Ok(r);
            }
        };
        let (policy, errs) = self.policy(&labels);
        if errs.is_empty()
            && policy.warn.level == Level::Privileged
            && policy.audit.level == Level::Privileged
        {
            return Ok(Response::default());
        }
        let Some(t) = obj.pointer(template).filter(|t| !t.is_null()) else {
            return Ok(Response::default());
        };
        let null = Value::Null;
        let meta = t.get("metadata").unwrap_or(&null);
        let spec = t.get("spec").unwrap_or(&null);
        Ok(self.evaluate_pod(&policy, &errs, meta, spec, false))
    }
}

#[async_trait]
impl Plugin for PodSecurity {
    fn name(&self) -> &'static str {
        "PodSecurity"
    }

    async fn validate(
        &self,
        rest: &Rest,
        a: &Attributes<'_>,
        obj: Option<&Value>,
    ) -> ApiResult<()> {
        let Some(obj) = obj else {
            return Ok(());
        };
        if !matches!(a.operation, Operation::Create | Operation::Update) {
            return Ok(());
        }
        let r = match (a.rt.group, a.rt.plural) {
            ("", "namespaces") => self.validate_namespace(rest, a, obj).await?,
            ("", "pods") => self.validate_pod(rest, a, obj).await?,
            _ => match template_path(a) {
                Some(t) => self.validate_pod_controller(rest, a, obj, t).await?,
                None => return Ok(()),
            },
        };
        for w in &r.warnings {
            crate::warnings::push(w.clone());
        }
        record_audit_annotations(audit_annotations(&r));
        match r.denied {
            None => Ok(()),
            Some(Denial::Forbidden(why)) => Err(forbidden(a, why)),
            Some(Denial::Internal(msg)) => Err(ApiError::internal(msg)),
            Some(Denial::Invalid(errs)) => {
                let causes = errs
                    .iter()
                    .map(|e| json!({"reason": e.cause_type(), "message": e.body(), "field": e.field}))
                    .collect();
                Err(ApiError::invalid(
                    a.rt,
                    a.name,
                    format!(
                        "{} \"{}\" is invalid: {}",
                        a.rt.kind,
                        a.name,
                        aggregate(&errs)
                    ),
                    causes,
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests;
