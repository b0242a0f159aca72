//! The ServiceAccounts controller (upstream's `pkg/controller/serviceaccount`):
//! every active namespace has a ServiceAccount named `default`, created when a
//! namespace appears and re-created when it is deleted.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use tracing::{info, warn};

use crate::Error;

/// The ServiceAccount every namespace gets.
pub const DEFAULT: &str = "default";

struct Ctx {
    client: kube::Client,
}

pub async fn run(client: kube::Client) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let accounts: Api<ServiceAccount> = Api::all(client.clone());
    Controller::new(namespaces, berth_runtime::reflect::informer_config())
        // A deleted (or changed) `default` account re-checks its namespace.
        .watches(accounts, berth_runtime::reflect::informer_config(), |sa| {
            let ns = sa.metadata.namespace.as_deref()?;
            (sa.metadata.name.as_deref() == Some(DEFAULT)).then(|| ObjectRef::new(ns))
        })
        .run(reconcile, error_policy, Arc::new(Ctx { client }))
        .for_each(|_| async {})
        .await;
}

fn error_policy(_ns: Arc<Namespace>, err: &Error, _ctx: Arc<Ctx>) -> Action {
    warn!(error = %err, "creating the default ServiceAccount failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

/// Whether a namespace should get accounts: not being deleted (upstream skips
/// namespaces that are not Active).
pub fn is_active(ns: &Namespace) -> bool {
    ns.metadata.deletion_timestamp.is_none()
        && ns
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .is_none_or(|p| p == "Active")
}

async fn reconcile(ns: Arc<Namespace>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    if !is_active(&ns) {
        return Ok(Action::await_change());
    }
    let Some(name) = ns.metadata.name.as_deref() else {
        return Ok(Action::await_change());
    };
    let api: Api<ServiceAccount> = Api::namespaced(ctx.client.clone(), name);
    if crate::lister::get(&api, DEFAULT).await?.is_some() {
        return Ok(Action::await_change());
    }
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(DEFAULT.into()),
            ..ObjectMeta::default()
        },
        ..ServiceAccount::default()
    };
    match api.create(&PostParams::default(), &sa).await {
        Ok(_) => info!(namespace = %name, "created ServiceAccount default"),
        // Already there (a race), or the namespace began terminating meanwhile.
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 403 || e.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NamespaceStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    #[test]
    fn active_namespaces() {
        let ns = |phase: Option<&str>, deleting: bool| Namespace {
            metadata: ObjectMeta {
                name: Some("x".into()),
                deletion_timestamp: deleting.then(|| Time(Default::default())),
                ..ObjectMeta::default()
            },
            status: Some(NamespaceStatus {
                phase: phase.map(String::from),
                ..NamespaceStatus::default()
            }),
            ..Namespace::default()
        };
        let cases = [
            (None, false, true),
            (Some("Active"), false, true),
            (Some("Terminating"), false, false),
            (Some("Active"), true, false),
            (Some("Terminating"), true, false),
        ];
        for (phase, deleting, want) in cases {
            assert_eq!(
                is_active(&ns(phase, deleting)),
                want,
                "{phase:?} {deleting}"
            );
        }
    }
}
