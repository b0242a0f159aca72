//! Dynamic admission: upstream's MutatingAdmissionWebhook and
//! ValidatingAdmissionWebhook plugins as a library the API server calls from
//! its admission chain (kube-apiserver's
//! `staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/`).
//!
//! - [`Registry`] (`config.rs`): the webhooks of the current configurations,
//!   in upstream's order; [`Webhooks`] holds the current one and the client.
//! - `predicates.rs`: rules, matchPolicy Equivalent, namespace and object
//!   selectors, the exemption of admission configuration objects, match
//!   conditions (evaluated by the caller through [`Hooks`]).
//! - `request.rs`: the AdmissionReview sent, the checks on the one received.
//! - `client.rs`: HTTPS (caBundle, `<svc>.<ns>.svc` server names, timeouts)
//!   through the caller's [`ServiceResolver`].
//! - `mutating.rs`, `validating.rs`: the dispatchers (patches,
//!   reinvocation, failurePolicy, concurrency); `errors.rs`: upstream's texts.
//! - `validation.rs`: [`validate_configuration`] for the configuration kinds.
//!
//! Everything a webhook returns is untrusted: bad answers become errors,
//! never panics.

#![forbid(unsafe_code)]
// An AdmissionError is a whole Status plus the warnings gathered so far; it
// ends the request, so its size on the error path does not matter.
#![allow(clippy::result_large_err)]

mod attributes;
mod call;
mod client;
mod config;
mod errors;
mod mutating;
mod predicates;
mod request;
mod url;
mod validating;
mod validation;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, RwLock};

pub use attributes::{
    Attributes, GroupVersionKind, GroupVersionResource, Hooks, MatchConditionInput, Operation,
};
pub use client::{MAX_RESPONSE_BYTES, ServiceResolver};
pub use config::{
    DEFAULT_TIMEOUT_SECONDS, FailurePolicy, MAX_TIMEOUT_SECONDS, MatchCondition, MatchPolicy,
    Registry, Rule, Webhook,
};
pub use errors::AdmissionError;
pub use mutating::{
    MUTATION_AUDIT_ANNOTATION_PREFIX, MUTATION_FAILED_OPEN_ANNOTATION_PREFIX,
    PATCH_AUDIT_ANNOTATION_PREFIX,
};
pub use predicates::labels;
pub use rustls::RootCertStore;
pub use validating::VALIDATING_FAILED_OPEN_ANNOTATION_PREFIX;
pub use validation::{
    validate_configuration, validate_configuration_update, validate_rule_with_operations,
};

/// What an admitted request carries back to the client and the audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// `Warning` headers for the response, in order, without repeats.
    pub warnings: Vec<String>,
    /// Audit annotations: the webhooks' own (`<webhook>/<key>`) and
    /// upstream's bookkeeping (`mutation.webhook.admission.k8s.io/…`,
    /// `failed-open.…`; `patch.webhook.admission.k8s.io/…` holds the patch
    /// itself and belongs to audit level Request and above only).
    pub audit_annotations: BTreeMap<String, String>,
}

impl Outcome {
    pub(crate) fn add_warning(&mut self, w: &str) {
        if !w.is_empty() && !self.warnings.iter().any(|x| x == w) {
            self.warnings.push(w.to_string());
        }
    }

    /// Adds `other`'s warnings and annotations (existing annotation keys keep
    /// their values).
    pub fn merge(&mut self, other: Outcome) {
        for w in &other.warnings {
            self.add_warning(w);
        }
        for (k, v) in other.audit_annotations {
            errors::add_annotation(&mut self.audit_annotations, k, v);
        }
    }
}

/// The two webhook admission plugins over the current configurations.
pub struct Webhooks {
    resolver: Arc<dyn ServiceResolver>,
    default_roots: Arc<RootCertStore>,
    registry: RwLock<Arc<Registry>>,
    /// The last Mutating and Validating configurations given; held while a
    /// snapshot is rebuilt, so that two updates racing cannot store a
    /// snapshot that misses the other's change.
    configs: Mutex<(Vec<serde_json::Value>, Vec<serde_json::Value>)>,
}

impl Webhooks {
    /// `resolver` finds Services (and URL hosts); `default_roots` verifies
    /// webhooks whose configuration has no `caBundle` (upstream: the
    /// system's roots).
    pub fn new(resolver: Arc<dyn ServiceResolver>, default_roots: RootCertStore) -> Self {
        Webhooks {
            resolver,
            default_roots: Arc::new(default_roots),
            registry: RwLock::new(Arc::new(Registry::default())),
            configs: Mutex::new((Vec::new(), Vec::new())),
        }
    }

    /// Replaces the MutatingWebhookConfigurations (all of them, as stored).
    pub fn set_mutating_configurations(&self, configs: Vec<serde_json::Value>) {
        self.update(|c| c.0 = configs);
    }

    /// Replaces the ValidatingWebhookConfigurations (all of them, as stored).
    pub fn set_validating_configurations(&self, configs: Vec<serde_json::Value>) {
        self.update(|c| c.1 = configs);
    }

    fn update(&self, f: impl FnOnce(&mut (Vec<serde_json::Value>, Vec<serde_json::Value>))) {
        // A poisoned lock only means another update panicked midway; the
        // lists themselves are still whole.
        let mut configs = self.configs.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut configs);
        let registry = Arc::new(Registry::new(&configs.0, &configs.1, &self.default_roots));
        match self.registry.write() {
            Ok(mut r) => *r = registry,
            Err(p) => *p.into_inner() = registry,
        }
    }

    /// The current snapshot.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.read().map(|r| r.clone()).unwrap_or_default()
    }

    /// MutatingAdmissionWebhook on `obj` (the object to be stored, at the
    /// request's version; `Value::Null` for operations without one, such as
    /// DELETE). `attrs.object` is not read: `obj` is.
    pub async fn mutate(
        &self,
        attrs: &Attributes<'_>,
        obj: &mut serde_json::Value,
        hooks: &dyn Hooks,
    ) -> Result<Outcome, AdmissionError> {
        let registry = self.registry();
        mutating::dispatch(&registry, self.resolver.as_ref(), attrs, obj, hooks).await
    }

    /// ValidatingAdmissionWebhook on `attrs.object` and `attrs.old_object`.
    pub async fn validate(
        &self,
        attrs: &Attributes<'_>,
        hooks: &dyn Hooks,
    ) -> Result<Outcome, AdmissionError> {
        let registry = self.registry();
        validating::dispatch(&registry, self.resolver.as_ref(), attrs, hooks).await
    }
}
