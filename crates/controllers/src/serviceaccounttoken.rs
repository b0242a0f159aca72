//! The ServiceAccount token controller (upstream's `tokens_controller`), for
//! the legacy Secret-based tokens that upstream ≥ 1.24 only makes on request:
//! a Secret of type `kubernetes.io/service-account-token` created by hand with
//! the annotation `kubernetes.io/service-account.name` gets `token` (a
//! non-expiring legacy JWT), `ca.crt` and `namespace`, and the
//! ServiceAccount's uid as `kubernetes.io/service-account.uid`. A Secret whose
//! ServiceAccount is gone (or has another uid) is deleted, as upstream does.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use berth_authn::serviceaccount::Issuer;
use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use tracing::{info, warn};

use crate::Error;

pub const SECRET_TYPE: &str = "kubernetes.io/service-account-token";
pub const NAME_ANNOTATION: &str = "kubernetes.io/service-account.name";
pub const UID_ANNOTATION: &str = "kubernetes.io/service-account.uid";

struct Ctx {
    client: kube::Client,
    issuer: Issuer,
    ca: String,
}

pub async fn run(client: kube::Client, issuer: Issuer, ca: String) {
    let secrets: Api<Secret> = Api::all(client.clone());
    let accounts: Api<ServiceAccount> = Api::all(client.clone());
    let only_tokens =
        berth_runtime::reflect::informer_config().fields(&format!("type={SECRET_TYPE}"));
    let ctx = Arc::new(Ctx { client, issuer, ca });
    Controller::new(secrets, only_tokens)
        // A ServiceAccount that changes or goes re-checks nothing by itself
        // (its Secrets name it, not the reverse): a periodic resync covers it.
        .watches(accounts, berth_runtime::reflect::informer_config(), |_sa| {
            None::<ObjectRef<Secret>>
        })
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

fn error_policy(_s: Arc<Secret>, err: &Error, _ctx: Arc<Ctx>) -> Action {
    warn!(error = %err, "populating a service account token Secret failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

/// What the controller does with one token Secret.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Not ours to handle (not a token Secret, or being deleted).
    Ignore,
    /// Its ServiceAccount is missing or is another one of the same name.
    Delete,
    /// Fill in what is missing: the token (when absent), ca.crt, namespace, uid.
    Populate {
        token: bool,
    },
    UpToDate,
}

/// Decides for `secret`, given its ServiceAccount's uid if it exists.
pub fn decide(secret: &Secret, sa_uid: Option<&str>, ca: &str) -> Decision {
    if secret.type_.as_deref() != Some(SECRET_TYPE) || secret.metadata.deletion_timestamp.is_some()
    {
        return Decision::Ignore;
    }
    let annotations = secret.metadata.annotations.clone().unwrap_or_default();
    if !annotations.contains_key(NAME_ANNOTATION) {
        return Decision::Ignore;
    }
    let Some(uid) = sa_uid else {
        return Decision::Delete;
    };
    if let Some(want) = annotations.get(UID_ANNOTATION)
        && !want.is_empty()
        && want != uid
    {
        return Decision::Delete;
    }
    let data = secret.data.clone().unwrap_or_default();
    let has = |k: &str, v: Option<&[u8]>| match (data.get(k), v) {
        (Some(b), Some(v)) => b.0 == v,
        (Some(b), None) => !b.0.is_empty(),
        (None, _) => false,
    };
    let ns = secret.metadata.namespace.clone().unwrap_or_default();
    let token = has("token", None);
    let complete = token
        && has("ca.crt", Some(ca.as_bytes()))
        && has("namespace", Some(ns.as_bytes()))
        && annotations.get(UID_ANNOTATION).map(String::as_str) == Some(uid);
    if complete {
        Decision::UpToDate
    } else {
        Decision::Populate { token: !token }
    }
}

async fn reconcile(secret: Arc<Secret>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = secret.metadata.namespace.clone().unwrap_or_default();
    let name = secret.metadata.name.clone().unwrap_or_default();
    let sa_name = secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NAME_ANNOTATION))
        .cloned()
        .unwrap_or_default();
    let sa = if sa_name.is_empty() {
        None
    } else {
        Api::<ServiceAccount>::namespaced(ctx.client.clone(), &ns)
            .get_opt(&sa_name)
            .await?
    };
    let sa_uid = sa.as_ref().and_then(|s| s.metadata.uid.clone());
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    match decide(&secret, sa_uid.as_deref(), &ctx.ca) {
        Decision::Ignore | Decision::UpToDate => {}
        Decision::Delete => match secrets.delete(&name, &DeleteParams::default()).await {
            Ok(_) => {
                info!(namespace = %ns, secret = %name, serviceaccount = %sa_name, "deleted token Secret of a missing ServiceAccount")
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        },
        Decision::Populate { token } => {
            let uid = sa_uid.unwrap_or_default();
            let mut s = (*secret).clone();
            let mut data: BTreeMap<String, ByteString> = s.data.take().unwrap_or_default();
            if token {
                let jwt = ctx
                    .issuer
                    .issue_legacy(&ns, &sa_name, &uid, &name)
                    .map_err(|e| Error::Discovery(format!("signing a legacy token: {e}")))?;
                data.insert("token".into(), ByteString(jwt.into_bytes()));
            }
            data.insert("ca.crt".into(), ByteString(ctx.ca.clone().into_bytes()));
            data.insert("namespace".into(), ByteString(ns.clone().into_bytes()));
            s.data = Some(data);
            s.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(UID_ANNOTATION.into(), uid);
            // Guarded by the resourceVersion we read: a conflict re-runs us.
            match secrets.replace(&name, &PostParams::default(), &s).await {
                Ok(_) => {
                    info!(namespace = %ns, secret = %name, "populated service account token Secret")
                }
                Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    // ServiceAccounts deleted later are noticed on the next pass.
    Ok(Action::requeue(Duration::from_secs(60)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn secret(ty: &str, annotations: &[(&str, &str)], data: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some("tok".into()),
                namespace: Some("ns".into()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            type_: Some(ty.into()),
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    #[test]
    fn decisions() {
        let named = [(NAME_ANNOTATION, "bot")];
        let full = [(NAME_ANNOTATION, "bot"), (UID_ANNOTATION, "u1")];
        let filled = [("token", "jwt"), ("ca.crt", "CA"), ("namespace", "ns")];
        let cases = [
            (
                "an Opaque secret",
                secret("Opaque", &named, &[]),
                Some("u1"),
                Decision::Ignore,
            ),
            (
                "no service account named",
                secret(SECRET_TYPE, &[], &[]),
                Some("u1"),
                Decision::Ignore,
            ),
            (
                "its account is gone",
                secret(SECRET_TYPE, &named, &[]),
                None,
                Decision::Delete,
            ),
            (
                "another account of that name",
                secret(
                    SECRET_TYPE,
                    &[(NAME_ANNOTATION, "bot"), (UID_ANNOTATION, "old")],
                    &filled,
                ),
                Some("u1"),
                Decision::Delete,
            ),
            (
                "new",
                secret(SECRET_TYPE, &named, &[]),
                Some("u1"),
                Decision::Populate { token: true },
            ),
            (
                "token kept, CA changed",
                secret(
                    SECRET_TYPE,
                    &full,
                    &[("token", "jwt"), ("ca.crt", "OLD"), ("namespace", "ns")],
                ),
                Some("u1"),
                Decision::Populate { token: false },
            ),
            (
                "complete",
                secret(SECRET_TYPE, &full, &filled),
                Some("u1"),
                Decision::UpToDate,
            ),
        ];
        for (what, s, uid, want) in cases {
            assert_eq!(decide(&s, uid, "CA"), want, "{what}");
        }
    }
}
