//! The admission chain: upstream's ordered admission plugins, each in its own
//! file, run on every write. Mutating plugins (`admit`) run in order on the
//! decoded, defaulted object before the kind's strategy and validation;
//! validating plugins (`validate`) run after validation, right before the
//! store write — upstream's handler order. `--enable-admission-plugins` and
//! `--disable-admission-plugins` choose the set ([`Config::resolve`]); the order
//! is always [`ORDER`]'s, whatever the flags' order, as kube-apiserver's.

pub mod config_file;
mod default_ingress_class;
mod default_storage_class;
mod default_toleration_seconds;
mod limit_ranger;
mod mutating_webhook;
mod namespace_lifecycle;
mod node_restriction;
mod persistent_volume_claim_resize;
pub mod pod_security;
mod priority;
mod resource_quota;
mod service_account;
mod storage_object_in_use_protection;
mod taint_nodes_by_condition;
pub(crate) mod validating_admission_policy;
mod validating_webhook;
mod webhook;

use async_trait::async_trait;
use berth_api::registry::ResourceType;
use berth_api::user::UserInfo;
use serde_json::Value;

use crate::rest::Rest;
use crate::status::{ApiError, ApiResult};

/// What a write does, as upstream's `admission.Operation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
    Delete,
}

/// One write as the plugins see it (upstream's `admission.Attributes`).
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    pub operation: Operation,
    pub rt: &'a ResourceType,
    pub subresource: Option<&'a str>,
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    /// None for the API server's own writes (bootstrap).
    pub user: Option<&'a UserInfo>,
    /// The stored object, for updates and deletes.
    pub old: Option<&'a Value>,
    pub dry_run: bool,
}

impl Attributes<'_> {
    /// The main resource of `group`/`kind` (no subresource).
    pub fn is(&self, group: &str, kind: &str) -> bool {
        self.subresource.is_none() && self.rt.group == group && self.rt.kind == kind
    }
}

#[async_trait]
pub trait Plugin: Send + Sync {
    fn name(&self) -> &'static str;
    /// The mutating phase: may change `obj` (the object to be stored).
    async fn admit(&self, _rest: &Rest, _a: &Attributes<'_>, _obj: &mut Value) -> ApiResult<()> {
        Ok(())
    }
    /// The validating phase: may only refuse. `obj` is None for deletes.
    async fn validate(
        &self,
        _rest: &Rest,
        _a: &Attributes<'_>,
        _obj: Option<&Value>,
    ) -> ApiResult<()> {
        Ok(())
    }
}

/// kube-apiserver's plugin order (`AllOrderedPlugins`, the part that changes
/// objects of the kinds Berth serves), and whether each is on by default.
/// A name here without an implementation below is refused by the flags.
pub const ORDER: &[(&str, bool)] = &[
    ("NamespaceLifecycle", true),
    ("LimitRanger", true),
    ("ServiceAccount", true),
    // Off by default upstream; on in k3s and kubeadm clusters, and here.
    ("NodeRestriction", true),
    ("TaintNodesByCondition", true),
    ("PodSecurity", true),
    ("Priority", true),
    ("DefaultTolerationSeconds", true),
    ("DefaultStorageClass", true),
    ("StorageObjectInUseProtection", true),
    ("PersistentVolumeClaimResize", true),
    ("RuntimeClass", true),
    ("DefaultIngressClass", true),
    ("MutatingAdmissionWebhook", true),
    ("ValidatingAdmissionPolicy", true),
    ("ValidatingAdmissionWebhook", true),
    ("ResourceQuota", true),
];

/// The plugins Berth implements, by name, with their configuration from
/// `--admission-control-config-file`.
fn build(name: &str, config: &config_file::AdmissionConfiguration) -> Option<Box<dyn Plugin>> {
    Some(match name {
        "NamespaceLifecycle" => Box::new(namespace_lifecycle::NamespaceLifecycle),
        "LimitRanger" => Box::new(limit_ranger::LimitRanger),
        "ServiceAccount" => Box::new(service_account::ServiceAccount),
        "NodeRestriction" => Box::new(node_restriction::NodeRestriction),
        "TaintNodesByCondition" => Box::new(taint_nodes_by_condition::TaintNodesByCondition),
        "PodSecurity" => Box::new(pod_security::PodSecurity::new(config.pod_security.clone())),
        "Priority" => Box::new(priority::Priority),
        "DefaultTolerationSeconds" => {
            Box::new(default_toleration_seconds::DefaultTolerationSeconds)
        }
        "DefaultStorageClass" => Box::new(default_storage_class::DefaultStorageClass),
        "StorageObjectInUseProtection" => {
            Box::new(storage_object_in_use_protection::StorageObjectInUseProtection)
        }
        "PersistentVolumeClaimResize" => {
            Box::new(persistent_volume_claim_resize::PersistentVolumeClaimResize)
        }
        "DefaultIngressClass" => Box::new(default_ingress_class::DefaultIngressClass),
        "MutatingAdmissionWebhook" => Box::new(mutating_webhook::MutatingAdmissionWebhook::new()),
        "ValidatingAdmissionPolicy" => {
            Box::new(validating_admission_policy::ValidatingAdmissionPolicy::new())
        }
        "ValidatingAdmissionWebhook" => {
            Box::new(validating_webhook::ValidatingAdmissionWebhook::new())
        }
        "ResourceQuota" => Box::new(resource_quota::ResourceQuota::new()),
        _ => return None,
    })
}

/// `--enable-admission-plugins` / `--disable-admission-plugins`.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pub enable: Vec<String>,
    pub disable: Vec<String>,
}

impl Config {
    /// The enabled plugin names in upstream's order: the defaults that Berth
    /// implements, plus `enable`, less `disable`. A name upstream does not know
    /// is an error (kube-apiserver's "unknown admission plugins"), and so is
    /// enabling one Berth does not implement yet, rather than silently
    /// accepting a plugin that would do nothing.
    pub fn resolve(&self) -> Result<Vec<&'static str>, String> {
        let known = |n: &str| ORDER.iter().any(|(o, _)| *o == n);
        let unknown: Vec<&str> = self
            .enable
            .iter()
            .chain(&self.disable)
            .map(String::as_str)
            .filter(|n| !known(n))
            .collect();
        if !unknown.is_empty() {
            return Err(format!("unknown admission plugins: {}", unknown.join(",")));
        }
        if let Some(both) = self.enable.iter().find(|n| self.disable.contains(n)) {
            return Err(format!(
                "{both} is enabled and disabled at the same time (--enable-admission-plugins and --disable-admission-plugins)"
            ));
        }
        let missing: Vec<&str> = self
            .enable
            .iter()
            .map(String::as_str)
            .filter(|n| build(n, &Default::default()).is_none())
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "admission plugins not implemented by Berth yet: {}",
                missing.join(",")
            ));
        }
        Ok(ORDER
            .iter()
            .filter(|(n, default)| {
                let wanted = *default || self.enable.iter().any(|e| e == n);
                wanted
                    && !self.disable.iter().any(|d| d == n)
                    && build(n, &Default::default()).is_some()
            })
            .map(|(n, _)| *n)
            .collect())
    }
}

/// The enabled plugins, in order.
pub struct Chain {
    plugins: Vec<Box<dyn Plugin>>,
}

impl Default for Chain {
    /// Every plugin that is on by default.
    fn default() -> Self {
        Chain::new(&Config::default().resolve().unwrap_or_default())
    }
}

impl Chain {
    pub fn new(names: &[&str]) -> Self {
        Chain::configured(names, &Default::default())
    }

    /// The chain with the plugins' configuration file.
    pub fn configured(names: &[&str], config: &config_file::AdmissionConfiguration) -> Self {
        Chain {
            plugins: names.iter().filter_map(|n| build(n, config)).collect(),
        }
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.plugins.iter().map(|p| p.name()).collect()
    }

    pub async fn admit(&self, rest: &Rest, a: &Attributes<'_>, obj: &mut Value) -> ApiResult<()> {
        for p in &self.plugins {
            p.admit(rest, a, obj).await?;
        }
        Ok(())
    }

    pub async fn validate(
        &self,
        rest: &Rest,
        a: &Attributes<'_>,
        obj: Option<&Value>,
    ) -> ApiResult<()> {
        for p in &self.plugins {
            p.validate(rest, a, obj).await?;
        }
        Ok(())
    }
}

/// Upstream's `admission.NewForbidden`: `<resource> "<name>" is forbidden: <why>`.
pub fn forbidden(a: &Attributes<'_>, why: impl std::fmt::Display) -> ApiError {
    let mut e = ApiError::forbidden(format!(
        "{} \"{}\" is forbidden: {why}",
        a.rt.group_resource(),
        a.name
    ));
    e.details = Some(serde_json::json!({"name": a.name, "group": a.rt.group, "kind": a.rt.plural}));
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(enable: &[&str], disable: &[&str]) -> Config {
        Config {
            enable: enable.iter().map(|s| s.to_string()).collect(),
            disable: disable.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn flags_choose_plugins_in_upstreams_order() {
        let all = [
            "NamespaceLifecycle",
            "LimitRanger",
            "ServiceAccount",
            "NodeRestriction",
            "TaintNodesByCondition",
            "PodSecurity",
            "Priority",
            "DefaultTolerationSeconds",
            "DefaultStorageClass",
            "StorageObjectInUseProtection",
            "PersistentVolumeClaimResize",
            "DefaultIngressClass",
            "MutatingAdmissionWebhook",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionWebhook",
            "ResourceQuota",
        ];
        let cases: &[(Config, Result<Vec<&str>, &str>)] = &[
            (cfg(&[], &[]), Ok(all.to_vec())),
            (
                cfg(&[], &["ServiceAccount", "Priority"]),
                Ok(vec![
                    "NamespaceLifecycle",
                    "LimitRanger",
                    "NodeRestriction",
                    "TaintNodesByCondition",
                    "PodSecurity",
                    "DefaultTolerationSeconds",
                    "DefaultStorageClass",
                    "StorageObjectInUseProtection",
                    "PersistentVolumeClaimResize",
                    "DefaultIngressClass",
                    "MutatingAdmissionWebhook",
                    "ValidatingAdmissionPolicy",
                    "ValidatingAdmissionWebhook",
                    "ResourceQuota",
                ]),
            ),
            // The flag's order does not matter.
            (
                cfg(&["DefaultIngressClass", "NamespaceLifecycle"], &[]),
                Ok(all.to_vec()),
            ),
            (
                cfg(&["Bogus"], &["AlsoBogus"]),
                Err("unknown admission plugins: Bogus,AlsoBogus"),
            ),
            (
                cfg(&["Priority"], &["Priority"]),
                Err(
                    "Priority is enabled and disabled at the same time (--enable-admission-plugins and --disable-admission-plugins)",
                ),
            ),
            (
                cfg(&["RuntimeClass"], &[]),
                Err("admission plugins not implemented by Berth yet: RuntimeClass"),
            ),
        ];
        for (c, want) in cases {
            let got = c.resolve();
            assert_eq!(
                got.as_ref().map_err(String::as_str),
                want.as_ref().map_err(|e| *e),
                "{c:?}"
            );
        }
        assert_eq!(Chain::new(&all).names(), all);
    }
}
