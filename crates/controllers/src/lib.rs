//! Berth's controllers. Each is a client of the API server (kube-rs), never of
//! the store: they watch objects and write through the API, as upstream's
//! kube-controller-manager does.

pub mod clusterroleaggregation;
pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod endpoints;
pub mod endpointslice;
pub mod garbagecollector;
pub mod history;
pub mod job;
pub mod namespace;
pub mod nodelifecycle;
pub mod podutil;
pub mod replicaset;
pub mod serviceaccount;
pub mod statefulset;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API request failed: {0}")]
    Kube(#[from] kube::Error),
    #[error("discovery failed: {0}")]
    Discovery(String),
}

/// Runs every controller until the process ends.
pub async fn run_all(client: kube::Client) {
    tokio::join!(
        clusterroleaggregation::run(client.clone()),
        namespace::run(client.clone()),
        garbagecollector::run(client.clone()),
        serviceaccount::run(client.clone()),
        replicaset::run(client.clone()),
        statefulset::run(client.clone()),
        daemonset::run(client.clone()),
        job::run(client.clone()),
        cronjob::run(client.clone()),
        endpoints::run(client.clone()),
        endpointslice::run(client.clone()),
        deployment::run(client),
    );
}
