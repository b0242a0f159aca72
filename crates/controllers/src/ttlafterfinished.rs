//! The TTL-after-finished controller (upstream `pkg/controller/ttlafterfinished`):
//! deletes a finished Job (foreground, so its pods go first) once
//! `ttlSecondsAfterFinished` has passed since it finished. It runs as its own
//! ServiceAccount (`ttl-after-finished-controller`), the only controller
//! allowed to delete Jobs.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, PropagationPolicy};
use kube::runtime::controller::{Action, Controller};
use tracing::{info, warn};

use crate::Error;
use crate::job::finished;

pub async fn run(client: kube::Client) {
    let jobs: Api<Job> = Api::all(client.clone());
    Controller::new(jobs, berth_runtime::reflect::informer_config())
        .run(reconcile, error_policy, Arc::new(client))
        .for_each(|_| async {})
        .await;
}

fn error_policy(job: Arc<Job>, err: &Error, _client: Arc<kube::Client>) -> Action {
    warn!(job = ?job.metadata.name, error = %err, "ttl-after-finished sync failed; retrying");
    Action::requeue(Duration::from_secs(2))
}

/// What to do with a Job at `now`: nothing (no TTL, unfinished, already
/// deleting), wait the seconds left, or delete it.
#[derive(Debug, PartialEq, Eq)]
enum Decision {
    Nothing,
    Wait(u64),
    Delete,
}

fn decide(job: &Job, now: Timestamp) -> Decision {
    let Some(ttl) = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished) else {
        return Decision::Nothing;
    };
    if job.metadata.deletion_timestamp.is_some() {
        return Decision::Nothing;
    }
    let Some(done) = finished(job) else {
        return Decision::Nothing;
    };
    // Upstream's jobFinishTime: when the finished condition became true.
    let finished_at = done
        .last_transition_time
        .as_ref()
        .or(job.status.as_ref().and_then(|s| s.completion_time.as_ref()))
        .map_or(now, |t| t.0);
    let age = now.duration_since(finished_at).as_secs();
    if age < i64::from(ttl) {
        Decision::Wait(u64::try_from(i64::from(ttl) - age).unwrap_or(1).max(1))
    } else {
        Decision::Delete
    }
}

impl Decision {
    /// The controller's next step unless the Job is to be deleted now.
    fn not_yet(self) -> Option<Action> {
        match self {
            Decision::Nothing => Some(Action::await_change()),
            Decision::Wait(s) => Some(Action::requeue(Duration::from_secs(s))),
            Decision::Delete => None,
        }
    }
}

async fn reconcile(job: Arc<Job>, client: Arc<kube::Client>) -> Result<Action, Error> {
    if let Some(next) = decide(&job, Timestamp::now()).not_yet() {
        return Ok(next);
    }
    let ns = job.metadata.namespace.clone().unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    let api: Api<Job> = Api::namespaced((*client).clone(), &ns);
    // As upstream: the cache may be stale (the TTL changed, the Job was
    // re-created): decide again on a fresh copy before deleting.
    let Some(fresh) = api.get_opt(&name).await? else {
        return Ok(Action::await_change());
    };
    if let Some(next) = decide(&fresh, Timestamp::now()).not_yet() {
        return Ok(next);
    }
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        preconditions: Some(kube::api::Preconditions {
            uid: fresh.metadata.uid.clone(),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(&name, &dp).await {
        Ok(_) => info!(job = %name, namespace = %ns, "deleted finished job after its TTL"),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobSpec, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn job(ttl: Option<i32>, finished_at: Option<i64>, deleting: bool) -> Job {
        let mut j = Job {
            spec: Some(JobSpec {
                ttl_seconds_after_finished: ttl,
                ..Default::default()
            }),
            ..Default::default()
        };
        if deleting {
            j.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        }
        if let Some(at) = finished_at {
            j.status = Some(JobStatus {
                conditions: Some(vec![JobCondition {
                    type_: "Complete".into(),
                    status: "True".into(),
                    last_transition_time: Timestamp::from_second(at).ok().map(Time),
                    ..Default::default()
                }]),
                ..Default::default()
            });
        }
        j
    }

    #[test]
    fn decisions() {
        let now = Timestamp::from_second(1_000).expect("time");
        let cases = [
            ("no ttl", job(None, Some(900), false), Decision::Nothing),
            ("unfinished", job(Some(10), None, false), Decision::Nothing),
            ("deleting", job(Some(0), Some(900), true), Decision::Nothing),
            ("ttl 0", job(Some(0), Some(1_000), false), Decision::Delete),
            (
                "waiting",
                job(Some(100), Some(990), false),
                Decision::Wait(90),
            ),
            (
                "expired",
                job(Some(100), Some(900), false),
                Decision::Delete,
            ),
        ];
        for (what, j, want) in cases {
            assert_eq!(decide(&j, now), want, "{what}");
        }
    }
}
