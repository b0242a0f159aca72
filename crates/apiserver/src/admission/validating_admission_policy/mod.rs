//! ValidatingAdmissionPolicy: upstream's in-process CEL admission
//! (`k8s.io/apiserver/pkg/admission/plugin/policy/validating`). Every
//! ValidatingAdmissionPolicyBinding whose policy exists, and whose policy's
//! `matchConstraints` and own `matchResources` select the request, has the
//! policy's `matchConditions` then `validations` evaluated over `object`,
//! `oldObject`, `request`, `params`, `namespaceObject` and `variables`; the
//! binding's `validationActions` say what a failed validation does.
//!
//! The policies and bindings are read from the watch cache when either
//! resource's revision moves, and each policy is compiled once per
//! resourceVersion (the request that sees the move rebuilds the snapshot
//! under a lock; the others then share it). Evaluation never awaits.
//!
//! Not done (yet) here, unlike upstream:
//! - `Audit` is logged (tracing): there is no audit log for its annotation.
//! - `authorizer` is declared but not bound: an expression that uses it
//!   fails to evaluate, and the failure policy decides.
//! - `matchPolicy: Equivalent` tries only the request's own resource (Berth
//!   serves each built-in resource at one version, autoscaling aside).
//! - `auditAnnotations` are validated but not evaluated.
//! - The status (`typeChecking`, `observedGeneration`, conditions) is left
//!   untouched: upstream's type checker needs the matched kinds' schemas,
//!   and these kinds get no generation bump yet (that is `berth_api::defaults`).

mod matching;
mod validation;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use berth_api::registry::{self, ResourceType};
use berth_cel::{Activation, EvalError, EvalValue, Program};
use serde_json::{Map, Value, json};

pub use validation::{
    validate_binding, validate_policy, validate_policy_status, validate_policy_update,
};

use super::{Attributes, Operation, Plugin};
use crate::objects;
use crate::rest::Rest;
use crate::status::{ApiError, ApiResult};

const POLICIES: &str = "validatingadmissionpolicies.admissionregistration.k8s.io";
const BINDINGS: &str = "validatingadmissionpolicybindings.admissionregistration.k8s.io";
/// Upstream's `MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// Which optional variables an environment declares (upstream's
/// `OptionalVariableDeclarations`): `params` only with a `paramKind`,
/// `variables` only when the policy has some, so that a reference to an
/// undeclared one fails to compile as upstream's does.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CelEnv {
    pub params: bool,
    pub variables: bool,
}

/// The CEL environment of one expression; `messageExpression`s get no
/// `authorizer`, as upstream's.
pub(crate) fn env_for(env: &CelEnv, authorizer: bool) -> berth_cel::Env {
    let mut e = berth_cel::Env::new()
        .with_dyn("object")
        .with_dyn("oldObject")
        .with_dyn("request")
        .with_dyn("namespaceObject");
    if env.params {
        e = e.with_dyn("params");
    }
    if env.variables {
        e = e.with_dyn("variables");
    }
    if authorizer {
        e = e.with_dyn("authorizer");
    }
    e
}

/// One compiled expression: its text and its program, or the compile error.
#[derive(Debug)]
struct Expr {
    source: String,
    program: Result<Program, String>,
}

impl Expr {
    fn compile(source: &str, env: &CelEnv, authorizer: bool) -> Self {
        Expr {
            source: source.to_string(),
            program: berth_cel::compile(source, &env_for(env, authorizer)).map_err(|e| e.message),
        }
    }
}

#[derive(Debug)]
struct Validation {
    expr: Expr,
    message: String,
    message_expression: Option<Expr>,
    reason: Option<String>,
}

/// A policy as the dispatcher uses it.
#[derive(Debug)]
struct CompiledPolicy {
    name: String,
    resource_version: String,
    /// `failurePolicy: Ignore` (the default is Fail).
    ignore_failures: bool,
    match_constraints: Value,
    /// `paramKind`'s apiVersion and kind.
    param_kind: Option<(String, String)>,
    match_conditions: Vec<Expr>,
    variables: Vec<(String, Expr)>,
    validations: Vec<Validation>,
}

impl CompiledPolicy {
    fn compile(obj: &Value) -> Self {
        let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let param_kind = spec
            .get("paramKind")
            .filter(|v| v.is_object())
            .map(|pk| (s(pk, "apiVersion"), s(pk, "kind")));
        let variables_raw = matching::arr(spec.get("variables"));
        let env = CelEnv {
            params: param_kind.is_some(),
            variables: !variables_raw.is_empty(),
        };
        CompiledPolicy {
            name: objects::name(obj).unwrap_or("").to_string(),
            resource_version: objects::resource_version(obj).unwrap_or("").to_string(),
            ignore_failures: spec.get("failurePolicy").and_then(Value::as_str) == Some("Ignore"),
            match_constraints: spec.get("matchConstraints").cloned().unwrap_or(json!({})),
            param_kind,
            match_conditions: matching::arr(spec.get("matchConditions"))
                .iter()
                .map(|c| Expr::compile(&s(c, "expression"), &env, true))
                .collect(),
            variables: variables_raw
                .iter()
                .map(|v| (s(v, "name"), Expr::compile(&s(v, "expression"), &env, true)))
                .collect(),
            validations: matching::arr(spec.get("validations"))
                .iter()
                .map(|v| Validation {
                    expr: Expr::compile(&s(v, "expression"), &env, true),
                    message: s(v, "message"),
                    message_expression: Some(s(v, "messageExpression"))
                        .filter(|m| !m.trim().is_empty())
                        .map(|m| Expr::compile(&m, &env, false)),
                    reason: v.get("reason").and_then(Value::as_str).map(String::from),
                })
                .collect(),
        }
    }
}

/// A binding as the dispatcher uses it.
#[derive(Debug, Clone)]
struct Binding {
    name: String,
    match_resources: Option<Value>,
    param_ref: Option<Value>,
    actions: Vec<String>,
}

impl Binding {
    fn from_object(obj: &Value) -> Self {
        let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
        Binding {
            name: objects::name(obj).unwrap_or("").to_string(),
            match_resources: spec
                .get("matchResources")
                .filter(|v| v.is_object())
                .cloned(),
            param_ref: spec.get("paramRef").filter(|v| v.is_object()).cloned(),
            actions: objects::strings(spec.get("validationActions")),
        }
    }
}

/// A policy with its bindings (upstream's `PolicyHook`).
#[derive(Debug)]
struct Hook {
    policy: Arc<CompiledPolicy>,
    bindings: Vec<Binding>,
}

/// The configuration at one pair of resource revisions.
#[derive(Debug, Default)]
struct Snapshot {
    revisions: (i64, i64),
    /// Every policy by name, bound or not, for reuse by the next snapshot.
    policies: HashMap<String, Arc<CompiledPolicy>>,
    /// Bound policies, by policy name; bindings by name.
    hooks: Vec<Hook>,
}

impl Snapshot {
    fn build(rest: &Rest, revisions: (i64, i64), previous: &Snapshot) -> Self {
        let decode_all = |resource: &str| -> Vec<Value> {
            let (items, _) = rest.cache.snapshot(&format!("/registry/{resource}/"));
            items
                .iter()
                .filter_map(|(_, s)| objects::decode_at(&s.bytes, s.mod_revision).ok())
                .collect()
        };
        let mut policies = HashMap::new();
        for obj in decode_all(POLICIES) {
            let name = objects::name(&obj).unwrap_or("").to_string();
            let rv = objects::resource_version(&obj).unwrap_or("");
            let compiled = match previous.policies.get(&name) {
                Some(p) if p.resource_version == rv => p.clone(),
                _ => Arc::new(CompiledPolicy::compile(&obj)),
            };
            policies.insert(name, compiled);
        }
        let mut by_policy: BTreeMap<String, Vec<Binding>> = BTreeMap::new();
        for obj in decode_all(BINDINGS) {
            let policy = obj
                .pointer("/spec/policyName")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            by_policy
                .entry(policy)
                .or_default()
                .push(Binding::from_object(&obj));
        }
        // A binding whose policy does not exist (yet) does nothing.
        let hooks = by_policy
            .into_iter()
            .filter_map(|(policy, mut bindings)| {
                bindings.sort_by(|a, b| a.name.cmp(&b.name));
                Some(Hook {
                    policy: policies.get(&policy)?.clone(),
                    bindings,
                })
            })
            .collect();
        Snapshot {
            revisions,
            policies,
            hooks,
        }
    }
}

pub struct ValidatingAdmissionPolicy {
    snapshot: Mutex<Arc<Snapshot>>,
}

impl ValidatingAdmissionPolicy {
    pub fn new() -> Self {
        ValidatingAdmissionPolicy {
            snapshot: Mutex::new(Arc::new(Snapshot::default())),
        }
    }

    /// The configuration, rebuilt when either resource moved.
    fn current(&self, rest: &Rest) -> Arc<Snapshot> {
        let revisions = (
            rest.cache.resource_revision(POLICIES),
            rest.cache.resource_revision(BINDINGS),
        );
        let mut guard = match self.snapshot.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if guard.revisions != revisions {
            *guard = Arc::new(Snapshot::build(rest, revisions, &guard));
        }
        guard.clone()
    }
}

impl Default for ValidatingAdmissionPolicy {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Plugin for ValidatingAdmissionPolicy {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionPolicy"
    }

    async fn validate(
        &self,
        rest: &Rest,
        a: &Attributes<'_>,
        obj: Option<&Value>,
    ) -> ApiResult<()> {
        if is_exempt(a) {
            return Ok(());
        }
        let snapshot = self.current(rest);
        if snapshot.hooks.is_empty() {
            return Ok(());
        }
        let server = ServerState { rest };
        let request = RequestContext::new(a, obj);
        match dispatch(&snapshot.hooks, &request, &server) {
            Some(denial) => Err(denial.to_error(a)),
            None => Ok(()),
        }
    }
}

/// Upstream never applies policies to the objects that configure admission
/// (`IsExemptAdmissionConfigurationResource`), so that a bad policy cannot
/// lock itself in.
fn is_exempt(a: &Attributes<'_>) -> bool {
    a.rt.group == "admissionregistration.k8s.io"
        && matches!(
            a.rt.kind,
            "ValidatingWebhookConfiguration"
                | "MutatingWebhookConfiguration"
                | "ValidatingAdmissionPolicy"
                | "ValidatingAdmissionPolicyBinding"
                | "MutatingAdmissionPolicy"
                | "MutatingAdmissionPolicyBinding"
        )
}

/// What the dispatcher reads from the server: namespaces and params.
trait Server: matching::Namespaces {
    /// A namespace object (`None` when it does not exist).
    fn namespace(&self, name: &str) -> Option<Value>;
    /// The param objects of `rt` named `name`, or selected by `selector`,
    /// in `namespace` (None for cluster-scoped params).
    fn params(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: Option<&str>,
        selector: Option<&berth_api::selector::LabelSelector>,
    ) -> Vec<Value>;
}

struct ServerState<'a> {
    rest: &'a Rest,
}

impl ServerState<'_> {
    fn decode(&self, key: &str) -> Option<Value> {
        let s = self.rest.cache.get(key)?;
        objects::decode_at(&s.bytes, s.mod_revision).ok()
    }
}

impl matching::Namespaces for ServerState<'_> {
    fn labels(&self, name: &str) -> Option<Map<String, Value>> {
        self.namespace(name).map(|ns| objects::labels(&ns))
    }
}

impl Server for ServerState<'_> {
    fn namespace(&self, name: &str) -> Option<Value> {
        self.decode(&format!("/registry/namespaces/{name}"))
    }

    fn params(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: Option<&str>,
        selector: Option<&berth_api::selector::LabelSelector>,
    ) -> Vec<Value> {
        let found: Vec<Value> = match name {
            Some(name) => self
                .decode(&objects::key(rt, namespace, name))
                .into_iter()
                .collect(),
            None => {
                let (items, _) = self
                    .rest
                    .cache
                    .snapshot(&objects::list_prefix(rt, namespace));
                items
                    .iter()
                    .filter_map(|(_, s)| objects::decode_at(&s.bytes, s.mod_revision).ok())
                    .filter(|o| selector.is_none_or(|sel| sel.matches_object(o)))
                    .collect()
            }
        };
        found
            .into_iter()
            .map(|o| berth_api::conversion::to_version(rt, o))
            .collect()
    }
}

/// The request in the forms the matcher and the expressions use.
struct RequestContext<'a> {
    operation: &'static str,
    rt: &'a ResourceType,
    subresource: &'a str,
    /// As upstream's attributes: a Namespace's own name for requests to it.
    namespace: &'a str,
    name: &'a str,
    object: Option<&'a Value>,
    old_object: Option<&'a Value>,
    /// The AdmissionRequest-shaped `request` variable.
    request: EvalValue,
    object_value: EvalValue,
    old_object_value: EvalValue,
}

impl<'a> RequestContext<'a> {
    fn new(a: &'a Attributes<'a>, obj: Option<&'a Value>) -> Self {
        let operation = match a.operation {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        };
        let is_namespace = a.rt.group.is_empty() && a.rt.plural == "namespaces";
        let namespace = match a.namespace {
            Some(ns) if !ns.is_empty() => ns,
            _ if is_namespace && a.operation != Operation::Create => a.name,
            _ => "",
        };
        let request = admission_request(a, operation, namespace);
        let to_value = |o: Option<&Value>| {
            o.map_or(EvalValue::Null, |o| {
                berth_cel::to_eval_value(o, None, false)
            })
        };
        RequestContext {
            operation,
            rt: a.rt,
            subresource: a.subresource.unwrap_or(""),
            namespace,
            name: a.name,
            object: obj,
            old_object: a.old,
            request: berth_cel::to_eval_value(&request, None, false),
            object_value: to_value(obj),
            old_object_value: to_value(a.old),
        }
    }

    fn matching(&self) -> matching::Request<'_> {
        matching::Request {
            operation: self.operation,
            group: self.rt.group,
            version: self.rt.version,
            resource: self.rt.plural,
            subresource: self.subresource,
            namespace: self.namespace,
            name: self.name,
            object: self.object,
            old_object: self.old_object,
        }
    }
}

/// Upstream's `CreateAdmissionRequest` as JSON (its omitempty fields left
/// out when empty, as the unstructured conversion does).
fn admission_request(a: &Attributes<'_>, operation: &str, namespace: &str) -> Value {
    let kind = json!({"group": a.rt.group, "version": a.rt.version, "kind": a.rt.kind});
    let resource = json!({"group": a.rt.group, "version": a.rt.version, "resource": a.rt.plural});
    let options_kind = match a.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
    };
    let mut req = json!({
        "uid": "",
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "operation": operation,
        "userInfo": {},
        "dryRun": a.dry_run,
        "options": {"kind": options_kind, "apiVersion": "meta.k8s.io/v1"},
    });
    if let Some(sub) = a.subresource.filter(|s| !s.is_empty()) {
        req["subResource"] = json!(sub);
        req["requestSubResource"] = json!(sub);
    }
    if !a.name.is_empty() {
        req["name"] = json!(a.name);
    }
    if !namespace.is_empty() {
        req["namespace"] = json!(namespace);
    }
    // The API server's own writes (no user) carry an empty userInfo.
    if let Some(u) = a.user {
        let mut ui = Map::new();
        if !u.name.is_empty() {
            ui.insert("username".into(), json!(u.name));
        }
        if !u.uid.is_empty() {
            ui.insert("uid".into(), json!(u.uid));
        }
        if !u.groups.is_empty() {
            ui.insert("groups".into(), json!(u.groups));
        }
        if !u.extra.is_empty() {
            ui.insert("extra".into(), json!(u.extra));
        }
        req["userInfo"] = Value::Object(ui);
    }
    req
}

/// The request refused: by the first denial, as upstream's dispatcher.
#[derive(Debug, Clone, PartialEq)]
struct Denial {
    policy: String,
    /// None for a policy-level configuration error.
    binding: Option<String>,
    message: String,
    reason: Option<String>,
}

impl Denial {
    fn text(&self) -> String {
        match &self.binding {
            Some(b) => format!(
                "ValidatingAdmissionPolicy '{}' with binding '{b}' denied request: {}",
                self.policy, self.message
            ),
            None => format!(
                "ValidatingAdmissionPolicy '{}' denied request: {}",
                self.policy, self.message
            ),
        }
    }

    /// Upstream's `admission.NewForbidden` with the validation's reason and
    /// its code (`reasonToCode`), the message repeated as the one cause
    /// (kubectl prints `The <resource> "<name>" is invalid: : <message>`).
    fn to_error(&self, a: &Attributes<'_>) -> ApiError {
        let text = self.text();
        let mut err = super::forbidden(a, &text);
        let (code, reason) = match self.reason.as_deref() {
            Some("Forbidden") => (403, "Forbidden"),
            Some("Unauthorized") => (401, "Unauthorized"),
            Some("RequestEntityTooLarge") => (413, "RequestEntityTooLarge"),
            _ => (422, "Invalid"),
        };
        err.code = code;
        err.reason = reason;
        if let Some(Value::Object(d)) = err.details.as_mut() {
            d.insert("causes".into(), json!([{"message": text}]));
        }
        err
    }
}

/// One validation's outcome (upstream's `PolicyDecision`).
#[derive(Debug, Clone, PartialEq)]
struct Decision {
    deny: bool,
    message: String,
    reason: Option<String>,
}

/// Upstream's `dispatcher.Dispatch`: every bound policy that matches, every
/// binding of it that matches, every param; the first denial refuses.
fn dispatch(hooks: &[Hook], req: &RequestContext<'_>, server: &dyn Server) -> Option<Denial> {
    let mut denied: Option<Denial> = None;
    let mut deny = |d: Denial| {
        denied.get_or_insert(d);
    };
    let m = req.matching();
    for hook in hooks {
        let p = &hook.policy;
        // A configuration error refuses the request unless the policy
        // ignores failures.
        let config_error = |binding: Option<&Binding>, err: String| {
            (!p.ignore_failures).then(|| Denial {
                policy: p.name.clone(),
                binding: binding.map(|b| b.name.clone()),
                message: match binding {
                    Some(_) => format!("failed to configure binding: {err}"),
                    None => format!("failed to configure policy: {err}"),
                },
                reason: None,
            })
        };
        // Upstream's dispatcher drops the policy-level match error (its
        // `err` is overwritten before use): a policy whose selectors cannot
        // be evaluated simply does not apply.
        if !matches!(
            matching::matches(&p.match_constraints, &m, server),
            Ok(true)
        ) {
            continue;
        }
        let param_rt = match param_resource(p) {
            Ok(rt) => rt,
            Err(e) => {
                if let Some(d) = config_error(None, e) {
                    deny(d);
                }
                continue;
            }
        };
        let namespace_object = namespace_object(req, server);
        for b in &hook.bindings {
            if let Some(mr) = &b.match_resources {
                match matching::matches(mr, &m, server) {
                    Ok(false) => continue,
                    Ok(true) => {}
                    Err(e) => {
                        if let Some(d) = config_error(Some(b), e) {
                            deny(d);
                        }
                        continue;
                    }
                }
            }
            let params = match collect_params(param_rt, b, req.namespace, server) {
                Ok(ps) => ps,
                Err(e) => {
                    if let Some(d) = config_error(Some(b), e) {
                        deny(d);
                    }
                    continue;
                }
            };
            for param in &params {
                let input = Input {
                    req,
                    params: param.as_ref(),
                    namespace_object: &namespace_object,
                };
                for d in evaluate(p, &input) {
                    if !d.deny {
                        continue;
                    }
                    for action in &b.actions {
                        match action.as_str() {
                            "Deny" => deny(Denial {
                                policy: p.name.clone(),
                                binding: Some(b.name.clone()),
                                message: d.message.clone(),
                                reason: d.reason.clone(),
                            }),
                            // Upstream's `warning.AddWarning`: a `Warning`
                            // header on the response.
                            "Warn" => crate::warnings::push(format!(
                                "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                                p.name, b.name, d.message
                            )),
                            // No audit log: upstream's annotation, logged.
                            "Audit" => tracing::info!(
                                policy = %p.name,
                                binding = %b.name,
                                message = %d.message,
                                "validation.policy.admission.k8s.io/validation_failure"
                            ),
                            _ => {}
                        }
                    }
                }
            }
        }
    }
    denied
}

/// The resource of the policy's `paramKind` (None without one).
fn param_resource(p: &CompiledPolicy) -> Result<Option<&'static ResourceType>, String> {
    let Some((api_version, kind)) = &p.param_kind else {
        return Ok(None);
    };
    let (group, version) = registry::split_api_version(api_version);
    registry::lookup_kind(group, version, kind)
        .map(Some)
        .ok_or_else(|| {
            format!(
                "failed to find resource referenced by paramKind: '{group}/{version}, Kind={kind}'"
            )
        })
}

/// Upstream's `CollectParams`: `[None]` when the policy or the binding uses
/// no params; the named or selected objects otherwise, in the binding's
/// namespace or else the request's; none found is an error under
/// `parameterNotFoundAction: Deny` (the default).
fn collect_params(
    rt: Option<&ResourceType>,
    b: &Binding,
    request_namespace: &str,
    server: &dyn Server,
) -> Result<Vec<Option<Value>>, String> {
    let (Some(rt), Some(pr)) = (rt, &b.param_ref) else {
        return Ok(vec![None]);
    };
    let s = |k: &str| pr.get(k).and_then(Value::as_str).unwrap_or("");
    let namespace = if rt.namespaced {
        if !s("namespace").is_empty() {
            Some(s("namespace"))
        } else if !request_namespace.is_empty() {
            Some(request_namespace)
        } else {
            return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into());
        }
    } else {
        if !s("namespace").is_empty() {
            return Err(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
            );
        }
        None
    };
    let mut params = if !s("name").is_empty() {
        if pr.get("selector").is_some_and(|v| !v.is_null()) {
            return Err("paramRef.name and paramRef.selector are mutually exclusive".into());
        }
        server.params(rt, namespace, Some(s("name")), None)
    } else if let Some(sel) = pr.get("selector").filter(|v| !v.is_null()) {
        let selector =
            berth_api::selector::LabelSelector::from_meta(sel).map_err(|e| e.0.clone())?;
        server.params(rt, namespace, None, Some(&selector))
    } else {
        return Err("one of name or selector must be provided".into());
    };
    if params.is_empty() {
        return match s("parameterNotFoundAction") {
            "Allow" => Ok(Vec::new()),
            _ => {
                Err("no params found for policy binding with `Deny` parameterNotFoundAction".into())
            }
        };
    }
    // Params carry their type meta, as upstream's wrappedParam ensures.
    for p in &mut params {
        if let Some(o) = p.as_object_mut() {
            o.entry("apiVersion")
                .or_insert_with(|| json!(rt.api_version()));
            o.entry("kind").or_insert_with(|| json!(rt.kind));
        }
    }
    Ok(params.into_iter().map(Some).collect())
}

/// `namespaceObject`: the request's namespace as upstream's
/// `CreateNamespaceObject` exposes it (metadata less managed fields, owners
/// and finalizers), null for cluster-scoped objects and for a Namespace
/// itself.
fn namespace_object(req: &RequestContext<'_>, server: &dyn Server) -> EvalValue {
    let is_namespace = req.rt.group.is_empty() && req.rt.kind == "Namespace";
    if req.namespace.is_empty() || is_namespace {
        return EvalValue::Null;
    }
    let Some(ns) = server.namespace(req.namespace) else {
        return EvalValue::Null;
    };
    let mut out = Map::new();
    for k in ["spec", "status"] {
        if let Some(v) = ns.get(k) {
            out.insert(k.into(), v.clone());
        }
    }
    if let Some(meta) = ns.get("metadata").and_then(Value::as_object) {
        let kept: Map<String, Value> = meta
            .iter()
            .filter(|(k, _)| {
                matches!(
                    k.as_str(),
                    "name"
                        | "generateName"
                        | "namespace"
                        | "uid"
                        | "resourceVersion"
                        | "generation"
                        | "creationTimestamp"
                        | "deletionTimestamp"
                        | "deletionGracePeriodSeconds"
                        | "labels"
                        | "annotations"
                )
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        out.insert("metadata".into(), Value::Object(kept));
    }
    berth_cel::to_eval_value(&Value::Object(out), None, false)
}

/// One evaluation's variables.
struct Input<'a> {
    req: &'a RequestContext<'a>,
    params: Option<&'a Value>,
    namespace_object: &'a EvalValue,
}

/// Upstream's `validator.Validate` for one param: the match conditions
/// (a false one skips the policy; errors fail or skip it by failure policy),
/// the variables, then every validation within the shared cost budget.
fn evaluate(p: &CompiledPolicy, input: &Input<'_>) -> Vec<Decision> {
    let error = |message: String| Decision {
        deny: !p.ignore_failures,
        message,
        reason: None,
    };
    let mut vars = Activation::new();
    vars.insert("object", input.req.object_value.clone());
    vars.insert("oldObject", input.req.old_object_value.clone());
    vars.insert("request", input.req.request.clone());
    vars.insert("namespaceObject", input.namespace_object.clone());
    if p.param_kind.is_some() {
        vars.insert(
            "params",
            input.params.map_or(EvalValue::Null, |v| {
                berth_cel::to_eval_value(v, None, false)
            }),
        );
    }
    let mut budget = berth_cel::RUNTIME_CEL_COST_BUDGET;
    let mut run = |program: &Program, vars: &Activation| -> Option<Result<EvalValue, EvalError>> {
        let (result, cost) = program.eval_with_limit(vars, berth_cel::PER_CALL_LIMIT);
        budget = budget.saturating_sub(i64::try_from(cost).unwrap_or(i64::MAX));
        (budget >= 0).then_some(result)
    };
    const OUT_OF_BUDGET: &str = "validation failed due to running out of cost budget, no further validation rules will be run";

    // Variables in order, each seeing the ones before it. Upstream evaluates
    // them lazily; evaluating them up front costs the same where used, and a
    // failed one is left out of the map, so only an expression that reads it
    // fails, with upstream's composition error (see `explain`).
    let mut failed: HashMap<&str, String> = HashMap::new();
    if !p.variables.is_empty() {
        let mut values: BTreeMap<berth_cel::Key, EvalValue> = BTreeMap::new();
        for (name, expr) in &p.variables {
            vars.insert("variables", EvalValue::map(values.clone()));
            match &expr.program {
                Err(e) => {
                    failed.insert(
                        name,
                        format!("composited variable \"{name}\" fails to compile: {e}"),
                    );
                }
                Ok(program) => match run(program, &vars) {
                    None => return vec![error(OUT_OF_BUDGET.into())],
                    Some(Ok(v)) => {
                        values.insert(berth_cel::Key::String(name.as_str().into()), v);
                    }
                    Some(Err(e)) => {
                        failed.insert(
                            name,
                            format!("composited variable \"{name}\" fails to evaluate: {e}"),
                        );
                    }
                },
            }
        }
        vars.insert("variables", EvalValue::map(values));
    }
    let explain = |expr: &Expr, e: EvalError| -> String {
        let detail = match &e {
            EvalError::NoSuchKey(k) => failed
                .get(k.as_str())
                .cloned()
                .unwrap_or_else(|| e.to_string()),
            _ => e.to_string(),
        };
        format!("expression '{}' resulted in error: {detail}", expr.source)
    };

    // Match conditions: any false skips; errors without a false fail or
    // skip by failure policy, aggregated as utilerrors does.
    let mut errors = Vec::new();
    for c in &p.match_conditions {
        match &c.program {
            Err(e) => errors.push(format!("compilation error: {e}")),
            Ok(program) => match run(program, &vars) {
                None => return vec![error(OUT_OF_BUDGET.into())],
                Some(Ok(EvalValue::Bool(false))) => return Vec::new(),
                Some(Ok(_)) => {}
                Some(Err(e)) => errors.push(explain(c, e)),
            },
        }
    }
    if !errors.is_empty() {
        if p.ignore_failures {
            return Vec::new();
        }
        let msg = if errors.len() == 1 {
            errors.remove(0)
        } else {
            format!("[{}]", errors.join(", "))
        };
        return vec![error(msg)];
    }

    let mut decisions = Vec::with_capacity(p.validations.len());
    for v in &p.validations {
        let program = match &v.expr.program {
            Ok(program) => program,
            Err(e) => {
                decisions.push(error(format!("compilation error: {e}")));
                continue;
            }
        };
        match run(program, &vars) {
            None => return vec![error(OUT_OF_BUDGET.into())],
            Some(Err(e)) => decisions.push(error(explain(&v.expr, e))),
            Some(Ok(EvalValue::Bool(true))) => decisions.push(Decision {
                deny: false,
                message: String::new(),
                reason: None,
            }),
            Some(Ok(_)) => {
                let evaluated = v
                    .message_expression
                    .as_ref()
                    .and_then(|me| me.program.as_ref().ok())
                    .and_then(|program| match run(program, &vars) {
                        Some(Ok(EvalValue::String(s))) => Some(s.to_string()),
                        _ => None,
                    });
                decisions.push(Decision {
                    deny: true,
                    message: failure_message(evaluated.as_deref(), &v.message, &v.expr.source),
                    reason: Some(v.reason.clone().unwrap_or_else(|| "Invalid".into())),
                });
            }
        }
    }
    decisions
}

/// A failed validation's message: the `messageExpression`'s result when it
/// is a usable one-line string, else `message`, else
/// `failed expression: <expression>`.
fn failure_message(evaluated: Option<&str>, message: &str, expression: &str) -> String {
    let from_expression = evaluated
        .map(str::trim)
        .filter(|m| !m.is_empty() && m.len() <= MAX_MESSAGE_BYTES && !m.contains('\n'));
    if let Some(m) = from_expression {
        return m.to_string();
    }
    let message = message.trim();
    if !message.is_empty() {
        return message.to_string();
    }
    format!("failed expression: {}", expression.trim())
}
