//! Berth's controllers. Each is a client of the API server (kube-rs), never of
//! the store: they watch objects and write through the API, as upstream's
//! kube-controller-manager does.

use std::path::PathBuf;
use std::time::Duration;

pub use clientbuilder::ClientBuilder;

pub mod certificates;
pub mod clientbuilder;
pub mod clusterroleaggregation;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod discovery;
pub mod disruption;
pub mod endpoints;
pub mod endpointslice;
pub mod garbagecollector;
pub mod history;
pub mod job;
pub mod lister;
pub mod namespace;
pub mod nodelifecycle;
pub mod podautoscaler;
pub mod podutil;
pub mod replicaset;
pub mod resourcequota;
pub mod rootcacertpublisher;
pub mod serviceaccount;
pub mod serviceaccounttoken;
pub mod statefulset;
pub mod statusupdate;
pub mod ttlafterfinished;
pub mod volume;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API request failed: {0}")]
    Kube(#[from] kube::Error),
    #[error("discovery failed: {0}")]
    Discovery(String),
}

/// What the controllers need besides a client.
#[derive(Debug, Clone)]
pub struct Config {
    /// The cluster CA certificate (PEM), published in every namespace as
    /// `kube-root-ca.crt` (upstream's `--root-ca-file`):
    /// `<data-dir>/tls/server-ca.crt` for `berth server`.
    pub root_ca_file: PathBuf,
    /// The folder of the ServiceAccount signing key (`service-account.key`,
    /// upstream's `--service-account-private-key-file`): legacy token Secrets
    /// are signed with it. `<data-dir>/tls` for `berth server`.
    pub service_account_key_dir: PathBuf,
    /// The CA certificate and key the CSR signer issues client certificates
    /// with (upstream's `--cluster-signing-cert-file`/`--cluster-signing-key-file`):
    /// `<data-dir>/tls/server-ca.crt` and `.key`, the CA the API server trusts.
    pub cluster_signing_cert_file: PathBuf,
    pub cluster_signing_key_file: PathBuf,
    /// The longest certificate the signer issues (`--cluster-signing-duration`,
    /// [`certificates::signer::DEFAULT_DURATION`]).
    pub cluster_signing_duration: Duration,
    /// The HorizontalPodAutoscaler controller's settings (upstream's
    /// `--horizontal-pod-autoscaler-*` flags).
    pub hpa: podautoscaler::Config,
    /// The resource quota controller's settings (`--resource-quota-sync-period`).
    pub resource_quota: resourcequota::Config,
}

/// Runs the legacy token Secret controller once its key and CA are read.
async fn run_token_controller(client: kube::Client, key_dir: PathBuf, ca_file: PathBuf) {
    // The key's issuer name is only used for bound tokens, never signed here.
    let issuer = match berth_authn::serviceaccount::Issuer::load_or_create(
        &key_dir,
        "https://kubernetes.default.svc.cluster.local",
        Vec::new(),
    ) {
        Ok(i) => i,
        Err(e) => {
            tracing::error!(dir = %key_dir.display(), error = %e, "loading the service account key: legacy token Secrets are not populated");
            return;
        }
    };
    match std::fs::read_to_string(&ca_file) {
        Ok(ca) => serviceaccounttoken::run(client, issuer, ca).await,
        Err(e) => {
            tracing::error!(file = %ca_file.display(), error = %e, "reading the root CA: legacy token Secrets are not populated")
        }
    }
}

/// Runs the root CA publisher once its CA is read; without it the other
/// controllers still run (upstream refuses to start, but pods without
/// `kube-root-ca.crt` only fail their kube-api-access mounts).
async fn run_root_ca_publisher(client: kube::Client, file: PathBuf) {
    match std::fs::read_to_string(&file) {
        Ok(pem) if !pem.trim().is_empty() => rootcacertpublisher::run(client, pem).await,
        Ok(_) => {
            tracing::error!(file = %file.display(), "root CA file is empty: kube-root-ca.crt is not published")
        }
        Err(e) => {
            tracing::error!(file = %file.display(), error = %e, "reading the root CA: kube-root-ca.crt is not published")
        }
    }
}

/// Runs the CSR signer once its CA is read; without it requests stay
/// approved but unissued (upstream refuses to start the signer too).
async fn run_csr_signer(client: kube::Client, config: Config) {
    let read = |p: &std::path::Path| {
        std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))
    };
    let ca = read(&config.cluster_signing_cert_file)
        .and_then(|cert| Ok((cert, read(&config.cluster_signing_key_file)?)))
        .and_then(|(cert, key)| {
            certificates::signer::Ca::from_pem(&cert, &key).map_err(|e| e.to_string())
        });
    match ca {
        Ok(ca) => certificates::signer::run(client, ca, config.cluster_signing_duration).await,
        Err(e) => tracing::error!(error = %e, "CertificateSigningRequests are not signed"),
    }
}

/// Runs every controller until the process ends, each with its own client
/// from `clients` (upstream's controller names, which are also its
/// ServiceAccounts' and `system:controller:*` roles').
pub async fn run_all(clients: ClientBuilder, config: Config) {
    let hpa = config.hpa.clone();
    let resource_quota = config.resource_quota.clone();
    let c = &clients;
    tokio::join!(
        // Upstream runs the tokens controller with the root client too: it
        // writes every namespace's token Secrets.
        run_token_controller(
            c.root(),
            config.service_account_key_dir.clone(),
            config.root_ca_file.clone()
        ),
        async {
            let client = c.client("root-ca-cert-publisher").await;
            run_root_ca_publisher(client, config.root_ca_file.clone()).await
        },
        async { certificates::approver::run(c.client("certificate-controller").await).await },
        async {
            let client = c.client("certificate-controller").await;
            run_csr_signer(client, config.clone()).await
        },
        async {
            let client = c.client("clusterrole-aggregation-controller").await;
            clusterroleaggregation::run(client).await
        },
        async { namespace::run(c.client("namespace-controller").await).await },
        async { garbagecollector::run(c.client("generic-garbage-collector").await).await },
        async { serviceaccount::run(c.client("service-account-controller").await).await },
        async { replicaset::run(c.client("replicaset-controller").await).await },
        async { statefulset::run(c.client("statefulset-controller").await).await },
        async { daemonset::run(c.client("daemon-set-controller").await).await },
        async { job::run(c.client("job-controller").await).await },
        async { cronjob::run(c.client("cronjob-controller").await).await },
        async {
            let client = c.client("ttl-after-finished-controller").await;
            ttlafterfinished::run(client).await
        },
        async { endpoints::run(c.client("endpoint-controller").await).await },
        async { endpointslice::run(c.client("endpointslice-controller").await).await },
        async {
            let client = c.client("endpointslicemirroring-controller").await;
            endpointslice::mirroring::run(client).await
        },
        async { podautoscaler::run(c.client("horizontal-pod-autoscaler").await, hpa).await },
        async {
            let client = c.client("resourcequota-controller").await;
            resourcequota::run(client, resource_quota).await
        },
        async { disruption::run(c.client("disruption-controller").await).await },
        async {
            let client = c.client("persistent-volume-binder").await;
            volume::persistentvolume::run(client).await
        },
        async { volume::pvcprotection::run(c.client("pvc-protection-controller").await).await },
        async { volume::pvprotection::run(c.client("pv-protection-controller").await).await },
        async { deployment::run(c.client("deployment-controller").await).await },
    );
}
