//! The Job controller (upstream `pkg/controller/job`): runs pods until
//! `completions` succeed (NonIndexed, or one per index for Indexed), at most
//! `parallelism` at a time, with exponential back-off after failures; fails
//! the Job past `backoffLimit` or `activeDeadlineSeconds`; honours `suspend`
//! (`ttlSecondsAfterFinished` is [`crate::ttlafterfinished`]'s).
//!
//! Finished pods are counted with upstream's `batch.kubernetes.io/job-tracking`
//! protocol: a finished pod's uid goes into `status.uncountedTerminatedPods`,
//! its finalizer is removed, then it moves into `succeeded`/`failed`, so no pod
//! is counted twice or lost. Success and failure first set the
//! `SuccessCriteriaMet`/`FailureTarget` condition and become `Complete`/`Failed`
//! once no pod is left running. Also honoured: `successPolicy` (Indexed Jobs),
//! `managedBy` (another controller's Jobs are left alone),
//! `podReplacementPolicy: Failed` and `podFailurePolicy` (FailJob, Ignore and
//! Count rules on failed pods) and `backoffLimitPerIndex`/`maxFailedIndexes`
//! (per-index failure counts in the `job-index-failure-count` annotation,
//! `status.failedIndexes`, per-index back-off, `FailIndex`).
//! Events use upstream's reasons (`SuccessfulCreate`, `SuccessfulDelete`,
//! `Completed`, `BackoffLimitExceeded`, `DeadlineExceeded`, `Suspended`,
//! `Resumed`).

pub mod failurepolicy;
pub mod logic;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::{Job, JobCondition};
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, ObjectFieldSelector, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;
use tracing::{info, warn};

use berth_runtime::events::{EventSource, EventType, Recorder};

use crate::Error;
use crate::podutil;
use crate::replicaset::{controller_ref, owner_ref, slow_start_batches};

pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";
pub const COMPLETION_INDEX_ENV: &str = "JOB_COMPLETION_INDEX";
/// Failures of the pod's index before it (backoffLimitPerIndex).
pub const INDEX_FAILURE_COUNT: &str = "batch.kubernetes.io/job-index-failure-count";

pub const COMPLETE: &str = "Complete";
pub const FAILED: &str = "Failed";
pub const FAILURE_TARGET: &str = "FailureTarget";
pub const SUCCESS_CRITERIA_MET: &str = "SuccessCriteriaMet";
pub const SUSPENDED: &str = "Suspended";
pub const BACKOFF_LIMIT_EXCEEDED: &str = "BackoffLimitExceeded";
pub const DEADLINE_EXCEEDED: &str = "DeadlineExceeded";
pub const COMPLETIONS_REACHED: &str = "CompletionsReached";
/// Periodic resync of unfinished Jobs (pods without the generated labels
/// bring no events).
const RESYNC: Duration = Duration::from_secs(30);
const BACKOFF_MESSAGE: &str = "Job has reached the specified backoff limit";
const DEADLINE_MESSAGE: &str = "Job was active longer than specified deadline";
const COMPLETIONS_MESSAGE: &str = "Reached expected number of succeeded pods";
const MAX_FAILED_INDEXES_MESSAGE: &str =
    "Job has exceeded the specified maximal number of failed indexes";
const FAILED_INDEXES_MESSAGE: &str = "Job has failed indexes";

struct Ctx {
    client: kube::Client,
    events: Recorder,
}

pub async fn run(client: kube::Client) {
    let jobs: Api<Job> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let controller = Controller::new(jobs, berth_runtime::reflect::informer_config())
        // Only Job pods (the label the API server puts on generated
        // selectors), not every pod; manual-selector Jobs rely on the resync.
        .owns(
            pods,
            berth_runtime::reflect::informer_config().labels("batch.kubernetes.io/controller-uid"),
        )
        .run(
            reconcile,
            error_policy,
            Arc::new(Ctx {
                client: client.clone(),
                events: Recorder::new(client.clone(), EventSource::new("job-controller", "")),
            }),
        )
        .for_each(|_| async {});
    tokio::join!(controller, release_orphans(client));
}

fn error_policy(job: Arc<Job>, err: &Error, _ctx: Arc<Ctx>) -> Action {
    warn!(job = ?job.metadata.name, error = %err, "job sync failed; retrying");
    Action::requeue(Duration::from_secs(2))
}

fn has_finalizer(p: &Pod) -> bool {
    p.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == TRACKING_FINALIZER)
}

async fn remove_finalizer(api: &Api<Pod>, p: &Pod) -> Result<(), Error> {
    let rest: Vec<&String> = p
        .metadata
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != TRACKING_FINALIZER)
        .collect();
    let patch = json!({"metadata": {"finalizers": rest, "uid": p.metadata.uid}});
    match api
        .patch(
            &podutil::name(p),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Pods keeping the tracking finalizer after their Job is gone (deleted,
/// orphaned) would never be removed: drop the finalizer once such a pod has
/// finished or is being deleted (upstream's orphan pod handling).
async fn release_orphans(client: kube::Client) {
    let pods: Api<Pod> = Api::all(client.clone());
    let cfg =
        berth_runtime::reflect::informer_config().labels("batch.kubernetes.io/controller-uid");
    let mut events = watcher::watcher(pods, cfg)
        .default_backoff()
        .applied_objects()
        .boxed();
    loop {
        let p = match events.try_next().await {
            Ok(Some(p)) => p,
            Ok(None) => return,
            Err(e) => {
                warn!(error = %e, "job pod watch failed");
                continue;
            }
        };
        if !has_finalizer(&p) || !(podutil::is_finished(&p) || podutil::is_terminating(&p)) {
            continue;
        }
        let ns = p.metadata.namespace.clone().unwrap_or_default();
        let orphan = match controller_ref(&p.metadata).filter(|r| r.kind == "Job") {
            None => true,
            Some(r) => {
                let jobs: Api<Job> = Api::namespaced(client.clone(), &ns);
                match jobs.get_opt(&r.name).await {
                    Ok(Some(j)) => j.metadata.uid.as_deref() != Some(r.uid.as_str()),
                    Ok(None) => true,
                    Err(_) => false,
                }
            }
        };
        if orphan {
            let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
            if let Err(e) = remove_finalizer(&api, &p).await {
                warn!(pod = %podutil::name(&p), error = %e, "removing job tracking finalizer");
            }
        }
    }
}

fn condition_true(job: &Job, type_: &str) -> Option<JobCondition> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == "True")
        .cloned()
}

pub(crate) fn finished(job: &Job) -> Option<JobCondition> {
    condition_true(job, COMPLETE).or_else(|| condition_true(job, FAILED))
}

fn new_condition(type_: &str, reason: &str, message: &str, now: Timestamp) -> JobCondition {
    JobCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// Sets a condition, keeping the transition time when its status is unchanged.
fn set_condition(conds: &mut Vec<JobCondition>, c: JobCondition) {
    match conds.iter_mut().find(|x| x.type_ == c.type_) {
        Some(x) if x.status == c.status && x.reason == c.reason => {}
        Some(x) => *x = c,
        None => conds.push(c),
    }
}

/// When a finished pod stopped: its containers' latest finishedAt.
fn finish_time(p: &Pod) -> Option<Timestamp> {
    p.status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref()?.finished_at.as_ref())
        .map(|t| t.0)
        .max()
}

fn index_failure_count(p: &Pod) -> i32 {
    p.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(INDEX_FAILURE_COUNT))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn completion_index(p: &Pod) -> Option<i32> {
    p.metadata
        .annotations
        .as_ref()?
        .get(COMPLETION_INDEX)?
        .parse()
        .ok()
}

/// (consecutive failures after the last success, time of the last failure).
fn failures_since_success(
    pods: &[Pod],
    policy: Option<&k8s_openapi::api::batch::v1::PodFailurePolicy>,
) -> (u32, Option<Timestamp>) {
    let last_success = pods
        .iter()
        .filter(|p| podutil::phase(p) == "Succeeded")
        .filter_map(finish_time)
        .max();
    let fails: Vec<Timestamp> = pods
        .iter()
        .filter(|p| podutil::phase(p) == "Failed")
        .filter(|p| {
            policy
                .is_none_or(|pol| failurepolicy::evaluate(pol, p) != failurepolicy::Outcome::Ignore)
        })
        .filter_map(finish_time)
        .filter(|t| last_success.is_none_or(|s| *t > s))
        .collect();
    (
        u32::try_from(fails.len()).unwrap_or(u32::MAX),
        fails.into_iter().max(),
    )
}

/// Updates the status of `latest` (what the sync read, then what it last
/// wrote) by `patch`, guarded by its resourceVersion: `Ok(false)` when the
/// Job is gone or changed meanwhile, so a sync working from a stale status
/// can never overwrite the counters.
async fn write_status(
    api: &Api<Job>,
    latest: &mut Job,
    patch: serde_json::Value,
) -> Result<bool, Error> {
    match crate::statusupdate::update_once(api, latest, &patch).await {
        Ok(j) => {
            *latest = j;
            Ok(true)
        }
        Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(false),
        Err(e) => Err(e.into()),
    }
}

async fn reconcile(job: Arc<Job>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let ns = job.metadata.namespace.clone().unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    let pods_api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let jobs_api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    // The counters are carried over from the stored status: read it fresh,
    // not from the watch cache, which may lag behind our last write.
    let Some(job) = jobs_api.get_opt(&name).await? else {
        return Ok(Action::await_change());
    };
    let job = Arc::new(job);
    let mut latest = (*job).clone();
    let Some(spec) = job.spec.clone() else {
        return Ok(Action::await_change());
    };
    // Upstream's JobManagedBy: another controller owns this Job's status.
    if spec
        .managed_by
        .as_deref()
        .is_some_and(|m| m != "kubernetes.io/job-controller")
    {
        return Ok(Action::await_change());
    }
    let selector = spec.selector.clone().unwrap_or_default();
    let pods = podutil::claim(&pods_api, job.as_ref(), &selector, |_| true).await?;
    let now = Timestamp::now();

    if finished(&job).is_some() {
        // Pods still carrying the finalizer (counted before) are released.
        for p in pods.iter().filter(|p| has_finalizer(p)) {
            remove_finalizer(&pods_api, p).await?;
        }
        // Deleting it after ttlSecondsAfterFinished is the
        // ttl-after-finished controller's part (crate::ttlafterfinished).
        return Ok(Action::await_change());
    }
    if job.metadata.deletion_timestamp.is_some() {
        for p in pods.iter().filter(|p| has_finalizer(p)) {
            remove_finalizer(&pods_api, p).await?;
        }
        return Ok(Action::await_change());
    }

    let mut status = job.status.clone().unwrap_or_default();
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    let suspended = spec.suspend == Some(true);
    let completions = spec.completions;

    // 1. Record newly finished pods as uncounted (or, for Indexed successes,
    //    in completedIndexes), then drop their finalizers.
    let mut uncounted = status.uncounted_terminated_pods.clone().unwrap_or_default();
    let mut unc_ok: BTreeSet<String> = uncounted
        .succeeded
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    let mut unc_fail: BTreeSet<String> = uncounted
        .failed
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect();
    let mut done_idx =
        logic::parse_indexes(status.completed_indexes.as_deref().unwrap_or_default());
    let per_index = indexed && spec.backoff_limit_per_index.is_some();
    let mut failed_idx = logic::parse_indexes(status.failed_indexes.as_deref().unwrap_or_default());
    let mut to_release: Vec<&Pod> = Vec::new();
    let mut policy_failure: Option<JobCondition> = None;
    for p in pods.iter().filter(|p| has_finalizer(p)) {
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let phase = podutil::phase(p);
        if phase == "Succeeded" {
            if indexed {
                if let Some(ix) = completion_index(p)
                    && completions.is_some_and(|c| ix < c)
                {
                    done_idx.insert(ix);
                }
            } else if !unc_fail.contains(&uid) {
                unc_ok.insert(uid);
            }
            to_release.push(p);
        } else if phase == "Failed" || (podutil::is_terminating(p) && !suspended) {
            let outcome = match (&spec.pod_failure_policy, phase == "Failed") {
                (Some(pol), true) => failurepolicy::evaluate(pol, p),
                _ => failurepolicy::Outcome::Count,
            };
            if let failurepolicy::Outcome::FailJob(m) = &outcome
                && policy_failure.is_none()
                && condition_true(&job, FAILURE_TARGET).is_none()
            {
                policy_failure = Some(new_condition(FAILURE_TARGET, failurepolicy::REASON, m, now));
            }
            if outcome != failurepolicy::Outcome::Ignore && !unc_ok.contains(&uid) {
                unc_fail.insert(uid);
            }
            // backoffLimitPerIndex: the index fails once its failures exceed the limit.
            if per_index
                && outcome != failurepolicy::Outcome::Ignore
                && let Some(ix) = completion_index(p)
                && !done_idx.contains(&ix)
                && (outcome == failurepolicy::Outcome::FailIndex
                    || index_failure_count(p) >= spec.backoff_limit_per_index.unwrap_or(0))
            {
                failed_idx.insert(ix);
            }
            to_release.push(p);
        } else if podutil::is_terminating(p) {
            to_release.push(p);
        }
    }
    let completed_str = logic::format_indexes(&done_idx);
    let unc_changed = uncounted.succeeded.clone().unwrap_or_default().len() != unc_ok.len()
        || uncounted.failed.clone().unwrap_or_default().len() != unc_fail.len();
    let failed_str = logic::format_indexes(&failed_idx);
    let idx_changed = indexed
        && (status.completed_indexes.clone().unwrap_or_default() != completed_str
            || (per_index && status.failed_indexes.as_deref() != Some(failed_str.as_str())));
    if unc_changed || idx_changed || policy_failure.is_some() {
        let mut patch = json!({"status": {"uncountedTerminatedPods": {
            "succeeded": unc_ok.iter().collect::<Vec<_>>(),
            "failed": unc_fail.iter().collect::<Vec<_>>(),
        }}});
        // Recorded with the uncounted pods: once their finalizers are gone
        // the pod that matched a FailJob rule may be too.
        if let Some(c) = &policy_failure {
            let mut conds = status.conditions.clone().unwrap_or_default();
            set_condition(&mut conds, c.clone());
            patch["status"]["conditions"] = json!(conds);
        }
        if indexed {
            patch["status"]["completedIndexes"] = json!(completed_str);
            patch["status"]["succeeded"] = json!(done_idx.len());
        }
        if per_index {
            patch["status"]["failedIndexes"] = json!(failed_str);
        }
        if !write_status(&jobs_api, &mut latest, patch).await? {
            return Ok(Action::requeue(Duration::from_millis(200)));
        }
    }
    for p in &to_release {
        remove_finalizer(&pods_api, p).await?;
    }
    // 2. Every uncounted pod is now released: move it into the counters.
    status.succeeded = Some(if indexed {
        i32::try_from(done_idx.len()).unwrap_or(i32::MAX)
    } else {
        status.succeeded.unwrap_or(0) + i32::try_from(unc_ok.len()).unwrap_or(0)
    });
    status.failed = Some(status.failed.unwrap_or(0) + i32::try_from(unc_fail.len()).unwrap_or(0));
    status.completed_indexes = indexed.then(|| completed_str.clone());
    status.failed_indexes = per_index.then(|| failed_str.clone());
    uncounted.succeeded = Some(Vec::new());
    uncounted.failed = Some(Vec::new());
    status.uncounted_terminated_pods = Some(uncounted);

    let active: Vec<&Pod> = pods
        .iter()
        .filter(|p| !podutil::is_finished(p) && !podutil::is_terminating(p))
        .collect();
    let terminating = pods
        .iter()
        .filter(|p| podutil::is_terminating(p) && !podutil::is_finished(p))
        .count();
    let succeeded = status.succeeded.unwrap_or(0);
    let failed = status.failed.unwrap_or(0);
    let mut conds = status.conditions.clone().unwrap_or_default();
    let mut requeue: Option<Duration> = None;

    // 3. Success and failure criteria.
    let mut failure = condition_true(&job, FAILURE_TARGET);
    let mut success = condition_true(&job, SUCCESS_CRITERIA_MET);
    let decided_before = failure.is_some() || success.is_some();
    if failure.is_none() && success.is_none() {
        let all_indexes_done = completions.is_some_and(|c| {
            i32::try_from(done_idx.len() + failed_idx.len()).unwrap_or(i32::MAX) >= c
        });
        if let Some(c) = policy_failure.clone() {
            failure = Some(c);
        } else if per_index
            && spec
                .max_failed_indexes
                .is_some_and(|m| i32::try_from(failed_idx.len()).unwrap_or(i32::MAX) > m)
        {
            failure = Some(new_condition(
                FAILURE_TARGET,
                "MaxFailedIndexesExceeded",
                MAX_FAILED_INDEXES_MESSAGE,
                now,
            ));
        } else if per_index && all_indexes_done && !failed_idx.is_empty() {
            failure = Some(new_condition(
                FAILURE_TARGET,
                "FailedIndexes",
                FAILED_INDEXES_MESSAGE,
                now,
            ));
        } else if !per_index && failed > spec.backoff_limit.unwrap_or(6) {
            failure = Some(new_condition(
                FAILURE_TARGET,
                BACKOFF_LIMIT_EXCEEDED,
                BACKOFF_MESSAGE,
                now,
            ));
        } else if let (Some(deadline), Some(start), false) = (
            spec.active_deadline_seconds,
            status.start_time.as_ref(),
            suspended,
        ) {
            let elapsed = now.duration_since(start.0).as_secs();
            if elapsed >= deadline {
                failure = Some(new_condition(
                    FAILURE_TARGET,
                    DEADLINE_EXCEEDED,
                    DEADLINE_MESSAGE,
                    now,
                ));
            } else {
                requeue = Some(Duration::from_secs(
                    u64::try_from(deadline - elapsed).unwrap_or(1).max(1),
                ));
            }
        }
        let policy_rule = spec
            .success_policy
            .as_ref()
            .filter(|_| indexed)
            .and_then(|p| logic::success_policy_match(&p.rules, &done_idx));
        let complete = match completions {
            Some(c) => succeeded >= c,
            None => succeeded > 0 && active.is_empty(),
        };
        if let (None, Some(i)) = (&failure, policy_rule) {
            success = Some(new_condition(
                SUCCESS_CRITERIA_MET,
                "SuccessPolicy",
                &format!("Matched rules at index {i}"),
                now,
            ));
        } else if failure.is_none() && complete {
            success = Some(new_condition(
                SUCCESS_CRITERIA_MET,
                COMPLETIONS_REACHED,
                COMPLETIONS_MESSAGE,
                now,
            ));
        }
    }
    let mut finished_now = false;
    if let Some(f) = &failure {
        if !decided_before {
            ctx.events.event(
                job.as_ref(),
                EventType::Warning,
                f.reason.as_deref().unwrap_or_default(),
                f.message.clone().unwrap_or_default(),
            );
        }
        set_condition(&mut conds, f.clone());
        delete_pods(&ctx, &job, &pods_api, &active).await?;
        if active.is_empty() && terminating == 0 {
            let mut c = f.clone();
            c.type_ = FAILED.into();
            c.last_transition_time = Some(Time(now));
            c.last_probe_time = Some(Time(now));
            set_condition(&mut conds, c);
            finished_now = true;
        }
    } else if let Some(s) = &success {
        set_condition(&mut conds, s.clone());
        delete_pods(&ctx, &job, &pods_api, &active).await?;
        if active.is_empty() && terminating == 0 {
            let mut c = s.clone();
            c.type_ = COMPLETE.into();
            c.last_transition_time = Some(Time(now));
            c.last_probe_time = Some(Time(now));
            set_condition(&mut conds, c);
            status.completion_time = Some(Time(now));
            finished_now = true;
            ctx.events.event(
                job.as_ref(),
                EventType::Normal,
                "Completed",
                "Job completed",
            );
        }
    } else if suspended {
        delete_pods(&ctx, &job, &pods_api, &active).await?;
        if !conds
            .iter()
            .any(|c| c.type_ == SUSPENDED && c.status == "True")
        {
            ctx.events.event(
                job.as_ref(),
                EventType::Normal,
                "Suspended",
                "Job suspended",
            );
        }
        set_condition(
            &mut conds,
            new_condition(SUSPENDED, "JobSuspended", "Job suspended", now),
        );
    } else {
        if let Some(c) = conds
            .iter_mut()
            .find(|c| c.type_ == SUSPENDED && c.status == "True")
        {
            // Resumed: the deadline counts from now (upstream resets startTime).
            c.status = "False".into();
            c.reason = Some("JobResumed".into());
            c.message = Some("Job resumed".into());
            c.last_transition_time = Some(Time(now));
            c.last_probe_time = Some(Time(now));
            status.start_time = Some(Time(now));
            ctx.events
                .event(job.as_ref(), EventType::Normal, "Resumed", "Job resumed");
        }
        if status.start_time.is_none() {
            status.start_time = Some(Time(now));
            if let Some(d) = spec.active_deadline_seconds {
                requeue = Some(Duration::from_secs(u64::try_from(d).unwrap_or(0).max(1)));
            }
        }
        if let Some(wait) = manage(
            &ctx,
            &job,
            &pods,
            &active,
            succeeded,
            Indexes {
                done: &done_idx,
                failed: &failed_idx,
            },
            now,
        )
        .await?
        {
            requeue = Some(requeue.map_or(wait, |r| r.min(wait)));
        }
    }

    // 4. Status.
    let ready = active.iter().filter(|p| podutil::is_ready(p)).count();
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let patch = json!({"status": {
        "active": count(active.len()),
        "ready": count(ready),
        "terminating": count(terminating),
        "succeeded": status.succeeded,
        "failed": status.failed,
        "completedIndexes": status.completed_indexes,
        "failedIndexes": status.failed_indexes,
        "uncountedTerminatedPods": {"succeeded": null, "failed": null},
        "startTime": status.start_time,
        "completionTime": status.completion_time,
        "conditions": conds,
    }});
    let old = serde_json::to_value(job.status.clone().unwrap_or_default()).unwrap_or_default();
    let changed = patch["status"].as_object().is_some_and(|m| {
        m.iter()
            .filter(|(k, _)| *k != "uncountedTerminatedPods")
            .any(|(k, v)| !same(old.get(k), v))
    });
    let stored_uncounted = job
        .status
        .as_ref()
        .and_then(|s| s.uncounted_terminated_pods.as_ref())
        .is_some_and(|u| {
            u.succeeded.as_ref().is_some_and(|v| !v.is_empty())
                || u.failed.as_ref().is_some_and(|v| !v.is_empty())
        });
    if (changed || unc_changed || stored_uncounted)
        && !write_status(&jobs_api, &mut latest, patch).await?
    {
        return Ok(Action::requeue(Duration::from_millis(200)));
    }
    if finished_now {
        info!(job = %name, "job finished");
    }
    Ok(match requeue {
        Some(d) => Action::requeue(d),
        None => Action::requeue(RESYNC),
    })
}

async fn delete_pods(ctx: &Ctx, job: &Job, api: &Api<Pod>, pods: &[&Pod]) -> Result<(), Error> {
    for p in pods {
        podutil::delete(api, p).await?;
        ctx.events.event(
            job,
            EventType::Normal,
            "SuccessfulDelete",
            format!("Deleted pod: {}", podutil::name(p)),
        );
    }
    Ok(())
}

/// Whether a stored status field equals the value about to be written
/// (absent, null, zero-ish empties and the value itself compare as equal).
fn same(old: Option<&serde_json::Value>, new: &serde_json::Value) -> bool {
    let empty = |v: &serde_json::Value| {
        v.is_null()
            || v.as_object().is_some_and(|m| m.is_empty())
            || v.as_array().is_some_and(|a| a.is_empty())
            || v.as_i64() == Some(0)
            || v.as_str() == Some("")
    };
    match old {
        Some(o) => o == new || (empty(o) && empty(new)),
        None => empty(new),
    }
}

/// Completed and failed indexes of an Indexed Job.
struct Indexes<'a> {
    done: &'a BTreeSet<i32>,
    failed: &'a BTreeSet<i32>,
}

/// Starts or stops pods towards the wanted active count; returns how long to
/// wait when back-off holds new pods back.
async fn manage(
    ctx: &Ctx,
    job: &Job,
    pods: &[Pod],
    active: &[&Pod],
    succeeded: i32,
    Indexes {
        done: done_idx,
        failed: failed_idx,
    }: Indexes<'_>,
    now: Timestamp,
) -> Result<Option<Duration>, Error> {
    let spec = job.spec.clone().unwrap_or_default();
    let ns = job.metadata.namespace.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    let per_index = indexed && spec.backoff_limit_per_index.is_some();
    // Failed indexes are settled too: nothing more runs for them.
    let settled = succeeded + i32::try_from(failed_idx.len()).unwrap_or(0);
    let want = logic::want_active(spec.parallelism.unwrap_or(1), spec.completions, settled);
    let have = i32::try_from(active.len()).unwrap_or(i32::MAX);
    // podReplacementPolicy Failed: a terminating pod is replaced only once it
    // has fully stopped, so it still holds its slot.
    let holding = if spec.pod_replacement_policy.as_deref() == Some("Failed") {
        i32::try_from(
            pods.iter()
                .filter(|p| podutil::is_terminating(p) && !podutil::is_finished(p))
                .count(),
        )
        .unwrap_or(0)
    } else {
        0
    };
    if have > want {
        // Not-ready and newest first, as upstream's ActivePods ranking.
        let mut ranked: Vec<&&Pod> = active.iter().collect();
        ranked.sort_by_key(|p| {
            (
                podutil::is_ready(p),
                std::cmp::Reverse(p.metadata.creation_timestamp.as_ref().map(|t| t.0)),
            )
        });
        for p in ranked
            .into_iter()
            .take(usize::try_from(have - want).unwrap_or(0))
        {
            podutil::delete(&api, p).await?;
            ctx.events.event(
                job,
                EventType::Normal,
                "SuccessfulDelete",
                format!("Deleted pod: {}", podutil::name(p)),
            );
        }
        return Ok(None);
    }
    if have + holding >= want {
        return Ok(None);
    }
    if !per_index {
        let (failures, last) = failures_since_success(pods, spec.pod_failure_policy.as_ref());
        let delay = logic::failure_backoff(failures);
        if let Some(last) = last {
            let since = now.duration_since(last).unsigned_abs();
            if since < delay {
                return Ok(Some(delay - since + Duration::from_millis(100)));
            }
        }
    }
    let n = usize::try_from(want - have - holding).unwrap_or(0);
    let mut wait: Option<Duration> = None;
    let to_create: Vec<Pod> = if indexed {
        let mut busy: BTreeSet<i32> = active.iter().filter_map(|p| completion_index(p)).collect();
        busy.extend(failed_idx.iter().copied());
        let mut out = Vec::new();
        for i in logic::next_indexes(spec.completions.unwrap_or(0), done_idx, &busy, usize::MAX) {
            if out.len() >= n {
                break;
            }
            // Per index: the failures so far and the back-off after the last one.
            let last_failed = pods
                .iter()
                .filter(|p| completion_index(p) == Some(i) && podutil::phase(p) == "Failed")
                .max_by_key(|p| finish_time(p));
            let failures = last_failed.map_or(0, |p| index_failure_count(p) + 1);
            if per_index && let Some(t) = last_failed.and_then(finish_time) {
                let delay = logic::failure_backoff(u32::try_from(failures).unwrap_or(0));
                let since = now.duration_since(t).unsigned_abs();
                if since < delay {
                    let left = delay - since + Duration::from_millis(100);
                    wait = Some(wait.map_or(left, |w| w.min(left)));
                    continue;
                }
            }
            let mut pod = new_pod(job, Some(i));
            if per_index {
                pod.metadata
                    .annotations
                    .get_or_insert_with(Default::default)
                    .insert(INDEX_FAILURE_COUNT.into(), failures.to_string());
            }
            out.push(pod);
        }
        out
    } else {
        (0..n).map(|_| new_pod(job, None)).collect()
    };
    let pp = PostParams::default();
    let mut queue = to_create.iter();
    for batch in slow_start_batches(to_create.len()) {
        let results =
            futures::future::join_all(queue.by_ref().take(batch).map(|p| api.create(&pp, p))).await;
        let mut failed = None;
        for r in results {
            match r {
                Ok(p) => ctx.events.event(
                    job,
                    EventType::Normal,
                    "SuccessfulCreate",
                    format!("Created pod: {}", podutil::name(&p)),
                ),
                Err(e) => {
                    ctx.events.event(
                        job,
                        EventType::Warning,
                        "FailedCreate",
                        format!("Error creating: {e}"),
                    );
                    failed = Some(e);
                }
            }
        }
        if let Some(e) = failed {
            return Err(e.into());
        }
    }
    Ok(wait)
}

/// A pod from the template, with the tracking finalizer and, for Indexed
/// Jobs, the completion index (annotation, label, env, hostname).
fn new_pod(job: &Job, index: Option<i32>) -> Pod {
    let name = job.metadata.name.clone().unwrap_or_default();
    let template = job
        .spec
        .as_ref()
        .map(|s| s.template.clone())
        .unwrap_or_default();
    let tmeta = template.metadata.unwrap_or_default();
    let mut labels = tmeta.labels.unwrap_or_default();
    let mut annotations = tmeta.annotations.unwrap_or_default();
    let mut finalizers = tmeta.finalizers.unwrap_or_default();
    finalizers.push(TRACKING_FINALIZER.into());
    let mut spec = template.spec.unwrap_or_default();
    let generate_name = match index {
        Some(i) => {
            annotations.insert(COMPLETION_INDEX.into(), i.to_string());
            labels.insert(COMPLETION_INDEX.into(), i.to_string());
            if spec.hostname.as_deref().unwrap_or_default().is_empty() {
                spec.hostname = Some(format!("{name}-{i}"));
            }
            let env = EnvVar {
                name: COMPLETION_INDEX_ENV.into(),
                value: None,
                value_from: Some(EnvVarSource {
                    field_ref: Some(ObjectFieldSelector {
                        api_version: None,
                        field_path: format!("metadata.annotations['{COMPLETION_INDEX}']"),
                    }),
                    ..Default::default()
                }),
            };
            for c in spec
                .containers
                .iter_mut()
                .chain(spec.init_containers.iter_mut().flatten())
            {
                let envs = c.env.get_or_insert_with(Vec::new);
                if !envs.iter().any(|e| e.name == COMPLETION_INDEX_ENV) {
                    envs.push(env.clone());
                }
            }
            format!("{name}-{i}-")
        }
        None => format!("{name}-"),
    };
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(generate_name),
            namespace: job.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            finalizers: Some(finalizers),
            owner_references: Some(vec![owner_ref(job)]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::JobSpec;
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateTerminated, ContainerStatus, PodSpec, PodStatus,
        PodTemplateSpec,
    };

    fn job() -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some("pi".into()),
                namespace: Some("default".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(JobSpec {
                template: PodTemplateSpec {
                    metadata: Some(ObjectMeta {
                        labels: Some([("job-name".to_string(), "pi".to_string())].into()),
                        ..Default::default()
                    }),
                    spec: Some(PodSpec {
                        containers: vec![Container {
                            name: "c".into(),
                            ..Default::default()
                        }],
                        ..Default::default()
                    }),
                },
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn indexed_pods_carry_their_index() {
        let p = new_pod(&job(), Some(2));
        assert_eq!(p.metadata.generate_name.as_deref(), Some("pi-2-"));
        assert_eq!(completion_index(&p), Some(2));
        assert_eq!(
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(COMPLETION_INDEX))
                .map(String::as_str),
            Some("2")
        );
        assert!(has_finalizer(&p));
        let spec = p.spec.unwrap_or_default();
        assert_eq!(spec.hostname.as_deref(), Some("pi-2"));
        let env = spec.containers[0].env.clone().unwrap_or_default();
        assert_eq!(env[0].name, COMPLETION_INDEX_ENV);

        let plain = new_pod(&job(), None);
        assert_eq!(plain.metadata.generate_name.as_deref(), Some("pi-"));
        assert!(plain.metadata.annotations.is_none());
        assert_eq!(
            plain.metadata.owner_references.unwrap_or_default()[0].kind,
            "Job"
        );
    }

    fn finished_pod(phase: &str, at: i64) -> Pod {
        Pod {
            status: Some(PodStatus {
                phase: Some(phase.into()),
                container_statuses: Some(vec![ContainerStatus {
                    state: Some(ContainerState {
                        terminated: Some(ContainerStateTerminated {
                            finished_at: Timestamp::from_second(at).ok().map(Time),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn failures_count_since_last_success() {
        let cases: Vec<(Vec<Pod>, u32, Option<i64>)> = vec![
            (vec![], 0, None),
            (vec![finished_pod("Failed", 10)], 1, Some(10)),
            (
                vec![finished_pod("Failed", 10), finished_pod("Failed", 30)],
                2,
                Some(30),
            ),
            (
                vec![
                    finished_pod("Failed", 10),
                    finished_pod("Succeeded", 20),
                    finished_pod("Failed", 30),
                ],
                1,
                Some(30),
            ),
            (
                vec![finished_pod("Failed", 10), finished_pod("Succeeded", 20)],
                0,
                None,
            ),
        ];
        for (pods, n, last) in cases {
            let (got_n, got_last) = failures_since_success(&pods, None);
            assert_eq!(got_n, n);
            assert_eq!(got_last.map(|t| t.as_second()), last);
        }
    }

    #[test]
    fn status_comparison_treats_empties_alike() {
        assert!(same(None, &json!(0)));
        assert!(same(None, &json!(null)));
        assert!(same(Some(&json!({})), &json!({})));
        assert!(!same(None, &json!(1)));
        assert!(!same(Some(&json!(1)), &json!(2)));
    }
}
