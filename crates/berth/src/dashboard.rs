//! `berth dashboard`: prints the web dashboard's URL (served by `berth server`
//! at `/dashboard/`) and a login token. The token is a ServiceAccount token,
//! issued through the TokenRequest API as `kubectl create token` does, for a
//! ServiceAccount bound to `cluster-admin` (created on first use); `--service-account`
//! names another one, whose own RBAC then limits what the page shows.

use std::time::Duration;

use anyhow::{Context, Result};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};

/// The ServiceAccount `berth dashboard` creates and binds to `cluster-admin`.
pub const ADMIN_SERVICE_ACCOUNT: &str = "berth-dashboard-admin";

#[derive(clap::Args, Debug)]
pub struct DashboardArgs {
    #[command(flatten)]
    cluster: crate::token::ClusterArgs,
    /// The ServiceAccount (`namespace/name`) whose token to print; by default
    /// `kube-system/berth-dashboard-admin`, created and bound to cluster-admin.
    #[arg(long)]
    service_account: Option<String>,
    /// How long the token is valid (as `kubectl create token --duration`).
    #[arg(long, default_value = "1h", value_parser = berth_controllers::nodelifecycle::parse_duration)]
    duration: Duration,
}

/// A create's outcome, where an object that already exists is fine.
fn created_or_exists<T>(r: kube::Result<T>) -> Result<()> {
    match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

pub async fn run(args: DashboardArgs) -> Result<()> {
    let config = args.cluster.config().await?;
    let server = config.cluster_url.to_string();
    let client = kube::Client::try_from(config)?;
    let (ns, name) = match &args.service_account {
        Some(sa) => sa
            .split_once('/')
            .map(|(n, s)| (n.to_string(), s.to_string()))
            .with_context(|| {
                format!("--service-account {sa:?} is not of the form namespace/name")
            })?,
        None => {
            let ns = "kube-system".to_string();
            let sa = ServiceAccount {
                metadata: ObjectMeta {
                    name: Some(ADMIN_SERVICE_ACCOUNT.into()),
                    namespace: Some(ns.clone()),
                    ..Default::default()
                },
                ..Default::default()
            };
            created_or_exists(
                Api::<ServiceAccount>::namespaced(client.clone(), &ns)
                    .create(&PostParams::default(), &sa)
                    .await,
            )?;
            let crb = ClusterRoleBinding {
                metadata: ObjectMeta {
                    name: Some(ADMIN_SERVICE_ACCOUNT.into()),
                    ..Default::default()
                },
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "ClusterRole".into(),
                    name: "cluster-admin".into(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: ADMIN_SERVICE_ACCOUNT.into(),
                    namespace: Some(ns.clone()),
                    ..Default::default()
                }]),
            };
            created_or_exists(
                Api::<ClusterRoleBinding>::all(client.clone())
                    .create(&PostParams::default(), &crb)
                    .await,
            )?;
            (ns, ADMIN_SERVICE_ACCOUNT.to_string())
        }
    };
    let tr = TokenRequest {
        spec: TokenRequestSpec {
            expiration_seconds: Some(args.duration.as_secs() as i64),
            audiences: vec![],
            bound_object_ref: None,
        },
        ..Default::default()
    };
    let sas: Api<ServiceAccount> = Api::namespaced(client, &ns);
    let issued = sas
        .create_token_request(&name, &PostParams::default(), &tr)
        .await
        .with_context(|| format!("requesting a token for the ServiceAccount {ns}/{name}"))?;
    let token = issued
        .status
        .map(|s| s.token)
        .context("the TokenRequest came back without a token")?;
    println!("Dashboard: {}/dashboard/", server.trim_end_matches('/'));
    println!("Token ({ns}/{name}, valid {}s):", args.duration.as_secs());
    println!("{token}");
    Ok(())
}
