//! What the two webhook plugins share: the [`berth_webhook::Webhooks`] client,
//! refreshed from the watch cache whenever a webhook configuration changes; the
//! Service resolver (a ready endpoint of the Service's port, as kube-apiserver
//! with `--enable-aggregator-routing`: it needs no service proxy on the API
//! server's host); and the API server's side of the dispatch (namespace labels,
//! CEL match conditions, decoding after a patch).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use berth_api::registry::ResourceType;
use berth_api::user::UserInfo;
use berth_webhook::{
    AdmissionError, Attributes as HookAttributes, GroupVersionKind, GroupVersionResource, Hooks,
    MatchConditionInput, Operation as HookOperation, RootCertStore, ServiceResolver, Webhooks,
};
use serde_json::{Value, json};

use super::{Attributes, Operation};
use crate::objects;
use crate::rest::Rest;
use crate::status::{ApiError, ApiResult};
use crate::watchcache::WatchCache;

/// Which configurations a plugin reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Mutating,
    Validating,
}

impl Kind {
    fn resource(self) -> &'static str {
        match self {
            Kind::Mutating => "mutatingwebhookconfigurations.admissionregistration.k8s.io",
            Kind::Validating => "validatingwebhookconfigurations.admissionregistration.k8s.io",
        }
    }
}

/// One plugin's webhooks, built on first use and refreshed when the stored
/// configurations move.
pub struct Dispatcher {
    kind: Kind,
    webhooks: OnceLock<Webhooks>,
    /// The configurations' resource revision the client was built from.
    revision: AtomicI64,
}

impl Dispatcher {
    pub fn new(kind: Kind) -> Self {
        Dispatcher {
            kind,
            webhooks: OnceLock::new(),
            revision: AtomicI64::new(-1),
        }
    }

    /// The client with the current configurations (`None` while there are none).
    fn current(&self, rest: &Rest) -> Option<&Webhooks> {
        let rev = rest.cache.resource_revision(self.kind.resource());
        if rev == 0 && self.webhooks.get().is_none() {
            return None;
        }
        let hooks = self.webhooks.get_or_init(|| {
            Webhooks::new(
                Arc::new(EndpointResolver {
                    cache: rest.cache.clone(),
                }),
                RootCertStore::empty(),
            )
        });
        if self.revision.swap(rev, Ordering::SeqCst) != rev {
            let (items, _) = rest
                .cache
                .snapshot(&format!("/registry/{}/", self.kind.resource()));
            let configs: Vec<Value> = items
                .iter()
                .filter_map(|(_, s)| objects::decode_at(&s.bytes, s.mod_revision).ok())
                .collect();
            match self.kind {
                Kind::Mutating => hooks.set_mutating_configurations(configs),
                Kind::Validating => hooks.set_validating_configurations(configs),
            }
        }
        Some(hooks)
    }

    /// MutatingAdmissionWebhook on `obj`.
    pub async fn mutate(&self, rest: &Rest, a: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
        let Some(webhooks) = self.current(rest) else {
            return Ok(());
        };
        let req = Request::new(a);
        let hooks = ServerHooks { rest, rt: a.rt };
        let attrs = req.attributes(a, None);
        let out = webhooks.mutate(&attrs, obj, &hooks).await;
        finish(out)
    }

    /// ValidatingAdmissionWebhook on the object to be stored (`None` for deletes).
    pub async fn validate(
        &self,
        rest: &Rest,
        a: &Attributes<'_>,
        obj: Option<&Value>,
    ) -> ApiResult<()> {
        let Some(webhooks) = self.current(rest) else {
            return Ok(());
        };
        let req = Request::new(a);
        let hooks = ServerHooks { rest, rt: a.rt };
        let attrs = req.attributes(a, obj);
        finish(webhooks.validate(&attrs, &hooks).await)
    }
}

/// The owned parts of the webhooks' view of one request.
struct Request {
    kind: GroupVersionKind,
    resource: GroupVersionResource,
    user: UserInfo,
    options: Value,
}

impl Request {
    fn new(a: &Attributes<'_>) -> Self {
        let options_kind = match a.operation {
            Operation::Create => "CreateOptions",
            Operation::Update => "UpdateOptions",
            Operation::Delete => "DeleteOptions",
        };
        Request {
            kind: GroupVersionKind::new(a.rt.group, a.rt.version, a.rt.kind),
            resource: GroupVersionResource::new(a.rt.group, a.rt.version, a.rt.plural),
            // The API server's own writes are made as its loopback identity.
            user: a.user.cloned().unwrap_or_else(|| UserInfo {
                name: "system:apiserver".into(),
                uid: String::new(),
                groups: vec!["system:authenticated".into(), "system:masters".into()],
                extra: Default::default(),
            }),
            options: json!({"kind": options_kind, "apiVersion": "meta.k8s.io/v1"}),
        }
    }

    fn attributes<'a>(
        &'a self,
        a: &'a Attributes<'a>,
        obj: Option<&'a Value>,
    ) -> HookAttributes<'a> {
        HookAttributes {
            operation: match a.operation {
                Operation::Create => HookOperation::Create,
                Operation::Update => HookOperation::Update,
                Operation::Delete => HookOperation::Delete,
            },
            kind: &self.kind,
            resource: &self.resource,
            subresource: a.subresource.unwrap_or(""),
            namespace: a.namespace.unwrap_or(""),
            name: a.name,
            user: &self.user,
            object: obj,
            old_object: a.old,
            dry_run: a.dry_run,
            options: Some(&self.options),
        }
    }
}

/// The webhooks' audit annotations onto the request's audit event; the
/// patch itself only from level Request on, as upstream's mutating plugin.
fn audit_annotations(annotations: std::collections::BTreeMap<String, String>) {
    let with_patch = crate::audit::level() >= Some(crate::audit::policy::Level::Request);
    for (k, v) in annotations {
        if with_patch || !k.starts_with(berth_webhook::PATCH_AUDIT_ANNOTATION_PREFIX) {
            crate::audit::add_annotation(k, v);
        }
    }
}

/// An admission error as the request's Status; the webhooks' warnings go to the
/// response either way, as upstream's.
fn finish(out: Result<berth_webhook::Outcome, AdmissionError>) -> ApiResult<()> {
    match out {
        Ok(o) => {
            o.warnings.into_iter().for_each(crate::warnings::push);
            audit_annotations(o.audit_annotations);
            Ok(())
        }
        Err(e) => {
            e.outcome
                .warnings
                .iter()
                .cloned()
                .for_each(crate::warnings::push);
            audit_annotations(e.outcome.audit_annotations.clone());
            // Upstream passes a webhook's reason through; the Status here holds
            // upstream's named reasons, and any other is left unset (StatusReasonUnknown).
            let reason: &'static str = match e.reason.as_str() {
                "Forbidden" => "Forbidden",
                "BadRequest" => "BadRequest",
                "NotFound" => "NotFound",
                "Invalid" => "Invalid",
                "Conflict" => "Conflict",
                "TooManyRequests" => "TooManyRequests",
                "Timeout" => "Timeout",
                "InternalError" => "InternalError",
                "Unauthorized" => "Unauthorized",
                "AlreadyExists" => "AlreadyExists",
                "MethodNotAllowed" => "MethodNotAllowed",
                "ServiceUnavailable" => "ServiceUnavailable",
                _ => "",
            };
            let mut err = ApiError::new(e.code, reason, e.message.clone());
            err.details = e.details.clone();
            Err(err)
        }
    }
}

/// A Service's port → one ready endpoint's address and target port.
struct EndpointResolver {
    cache: Arc<WatchCache>,
}

#[async_trait]
impl ServiceResolver for EndpointResolver {
    async fn resolve_service(
        &self,
        namespace: &str,
        name: &str,
        port: u16,
    ) -> Result<SocketAddr, String> {
        crate::endpoints::resolve_service(&self.cache, namespace, name, port)
    }
}

/// The API server's answers to the dispatchers.
struct ServerHooks<'a> {
    rest: &'a Rest,
    rt: &'a ResourceType,
}

#[async_trait]
impl Hooks for ServerHooks<'_> {
    async fn namespace_labels(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, String> {
        let Some(s) = self.rest.cache.get(&format!("/registry/namespaces/{name}")) else {
            return Ok(None);
        };
        let ns = objects::decode_at(&s.bytes, s.mod_revision).map_err(|e| e.message)?;
        Ok(Some(
            objects::labels(&ns)
                .into_iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k, v.to_string())))
                .collect(),
        ))
    }

    /// `matchConditions`: CEL over `object`, `oldObject`, `request` (and
    /// `authorizer`, which is not offered: an expression using it fails to
    /// compile and the webhook's failure policy decides).
    fn evaluate_match_condition(&self, input: &MatchConditionInput<'_>) -> Result<bool, String> {
        let env = berth_cel::Env::new()
            .with_dyn("object")
            .with_dyn("oldObject")
            .with_dyn("request");
        let program = berth_cel::compile(input.expression, &env).map_err(|e| e.to_string())?;
        let mut vars = berth_cel::Activation::new();
        let field = |k: &str| input.request.get(k).cloned().unwrap_or(Value::Null);
        vars.insert(
            "object",
            berth_cel::to_eval_value(&field("object"), None, false),
        );
        vars.insert(
            "oldObject",
            berth_cel::to_eval_value(&field("oldObject"), None, false),
        );
        vars.insert(
            "request",
            berth_cel::to_eval_value(input.request, None, false),
        );
        match program.eval(&vars).map_err(|e| e.to_string())? {
            berth_cel::EvalValue::Bool(b) => Ok(b),
            other => Err(format!(
                "expression must evaluate to bool, got {}",
                other.type_name()
            )),
        }
    }

    /// A patched object is decoded and defaulted again, as upstream's scheme does.
    fn after_patch(&self, _kind: &GroupVersionKind, obj: &mut Value) -> Result<(), String> {
        let decoded = crate::decode::decode_object(
            self.rt,
            obj.take(),
            crate::decode::FieldValidation::Ignore,
        )
        .map_err(|e| e.message)?;
        *obj = decoded.obj;
        crate::rest::apply_defaults(self.rt, obj);
        Ok(())
    }
}
