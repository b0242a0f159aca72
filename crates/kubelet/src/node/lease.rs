//! The node heartbeat: a Lease named after the node in `kube-node-lease`, renewed
//! every quarter of its duration (upstream's `nodelease` controller).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};

use crate::Result;

/// Where node Leases live.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
/// Upstream kubelet's `nodeLeaseDurationSeconds`.
pub const LEASE_DURATION_SECONDS: i32 = 40;
/// Upstream renews at a quarter of the lease duration.
pub const RENEW_INTERVAL: Duration = Duration::from_secs(10);
/// How often the kubelet computes its status (`nodeStatusUpdateFrequency`).
pub const NODE_STATUS_UPDATE_FREQUENCY: Duration = Duration::from_secs(10);
/// How often an unchanged status is still posted (`nodeStatusReportFrequency`).
pub const NODE_STATUS_REPORT_FREQUENCY: Duration = Duration::from_secs(300);

/// One node's Lease, cached between renewals so each renewal is a single PUT.
#[derive(Clone, Debug)]
pub struct LeaseHeartbeat {
    pub node: String,
    pub node_uid: Option<String>,
    cached: Option<Lease>,
}

impl LeaseHeartbeat {
    pub fn new(node: impl Into<String>, node_uid: Option<String>) -> Self {
        LeaseHeartbeat {
            node: node.into(),
            node_uid,
            cached: None,
        }
    }

    fn desired(&self) -> Lease {
        let now = MicroTime(Timestamp::now());
        Lease {
            metadata: ObjectMeta {
                name: Some(self.node.clone()),
                namespace: Some(LEASE_NAMESPACE.into()),
                // Owned by the Node so the lease goes away with it.
                owner_references: self.node_uid.as_ref().map(|uid| {
                    vec![OwnerReference {
                        api_version: "v1".into(),
                        kind: "Node".into(),
                        name: self.node.clone(),
                        uid: uid.clone(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.node.clone()),
                lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
                renew_time: Some(now),
                ..Default::default()
            }),
        }
    }

    /// Renews the lease (creating it if missing); on a conflict, re-reads and retries once.
    pub async fn renew(&mut self, api: &Api<Lease>) -> Result<()> {
        for _ in 0..2 {
            let res = match self.cached.take() {
                Some(mut l) => {
                    let spec = l.spec.get_or_insert_with(Default::default);
                    spec.renew_time = Some(MicroTime(Timestamp::now()));
                    spec.holder_identity = Some(self.node.clone());
                    spec.lease_duration_seconds = Some(LEASE_DURATION_SECONDS);
                    api.replace(&self.node, &PostParams::default(), &l).await
                }
                None => match api.get_opt(&self.node).await? {
                    Some(mut l) => {
                        let spec = l.spec.get_or_insert_with(Default::default);
                        spec.renew_time = Some(MicroTime(Timestamp::now()));
                        spec.holder_identity = Some(self.node.clone());
                        spec.lease_duration_seconds = Some(LEASE_DURATION_SECONDS);
                        api.replace(&self.node, &PostParams::default(), &l).await
                    }
                    None => api.create(&PostParams::default(), &self.desired()).await,
                },
            };
            match res {
                Ok(l) => {
                    self.cached = Some(l);
                    return Ok(());
                }
                // Someone else wrote it (or it vanished): re-read next round.
                Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}
