//! The CronJob controller (upstream `pkg/controller/cronjob`, v2): creates a
//! Job `<cronjob>-<scheduled time in minutes since the epoch>` at each
//! scheduled time, honouring `concurrencyPolicy`, `suspend`,
//! `startingDeadlineSeconds` and `timeZone` (read from the system zoneinfo;
//! without `timeZone` the schedule runs in UTC), keeps `status.active`,
//! `lastScheduleTime` and `lastSuccessfulTime`, and deletes finished Jobs
//! beyond the history limits. Events use upstream's reasons and messages.

pub mod schedule;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;
use kube::api::{Api, DeleteParams, ListParams, PostParams, PropagationPolicy};
use kube::runtime::controller::{Action, Controller};
use serde_json::json;
use tracing::{info, warn};

use berth_runtime::events::{EventSource, EventType, Recorder};

use crate::Error;
use crate::replicaset::{controller_ref, owner_ref};
use schedule::Schedule;

/// Upstream's `batch.kubernetes.io/cronjob-scheduled-timestamp` annotation.
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// Upstream warns past this many missed start times.
const TOO_MANY_MISSED: usize = 100;

struct Ctx {
    client: kube::Client,
    events: Recorder,
}

pub async fn run(client: kube::Client) {
    let cjs: Api<CronJob> = Api::all(client.clone());
    let jobs: Api<Job> = Api::all(client.clone());
    Controller::new(cjs, berth_runtime::reflect::informer_config())
        .owns(jobs, berth_runtime::reflect::informer_config())
        .run(
            reconcile,
            error_policy,
            Arc::new(Ctx {
                events: Recorder::new(client.clone(), EventSource::new("cronjob-controller", "")),
                client,
            }),
        )
        .for_each(|_| async {})
        .await;
}

fn error_policy(cj: Arc<CronJob>, err: &Error, _ctx: Arc<Ctx>) -> Action {
    warn!(cronjob = ?cj.metadata.name, error = %err, "cronjob sync failed; retrying");
    Action::requeue(Duration::from_secs(2))
}

/// Upstream's getJobName: `<cronjob>-<unix minutes>`.
pub fn job_name(cronjob: &str, scheduled: Timestamp) -> String {
    format!("{cronjob}-{}", scheduled.as_second().div_euclid(60))
}

/// The zone the schedule runs in; `Err` for an unknown `timeZone`.
pub fn time_zone(name: Option<&str>) -> Result<TimeZone, String> {
    match name {
        None | Some("") => Ok(TimeZone::UTC),
        Some("UTC" | "Etc/UTC") => Ok(TimeZone::UTC),
        Some(n) => TimeZone::get(n).map_err(|e| format!("unknown time zone {n}: {e}")),
    }
}

/// (finished, succeeded) from the Job's conditions.
fn job_finished(j: &Job) -> (bool, bool) {
    let conds = j
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let is = |t: &str| conds.iter().any(|c| c.type_ == t && c.status == "True");
    (is("Complete") || is("Failed"), is("Complete"))
}

fn job_ref(j: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: j.metadata.name.clone(),
        namespace: j.metadata.namespace.clone(),
        uid: j.metadata.uid.clone(),
        resource_version: j.metadata.resource_version.clone(),
        field_path: None,
    }
}

fn requeue_at(next: Option<Timestamp>, now: Timestamp) -> Action {
    match next {
        // A little after the minute so the scheduled time has passed.
        Some(t) => Action::requeue(
            Duration::try_from(t.duration_since(now)).unwrap_or(Duration::ZERO)
                + Duration::from_millis(100),
        ),
        None => Action::await_change(),
    }
}

async fn reconcile(cj: Arc<CronJob>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let Some(spec) = cj.spec.clone() else {
        return Ok(Action::await_change());
    };
    let ns = cj.metadata.namespace.clone().unwrap_or_default();
    let name = cj.metadata.name.clone().unwrap_or_default();
    let uid = cj.metadata.uid.clone().unwrap_or_default();
    let jobs_api: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
    let cj_api: Api<CronJob> = Api::namespaced(ctx.client.clone(), &ns);
    let jobs: Vec<Job> = jobs_api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|j| controller_ref(&j.metadata).is_some_and(|r| r.uid == uid))
        .collect();
    let now = Timestamp::now();
    let old_status = cj.status.clone().unwrap_or_default();

    // Active list from the Jobs that exist and have not finished.
    let mut active: Vec<ObjectReference> = jobs
        .iter()
        .filter(|j| !job_finished(j).0 && j.metadata.deletion_timestamp.is_none())
        .map(job_ref)
        .collect();
    // Jobs that were active and have finished since.
    for r in old_status.active.iter().flatten() {
        if let Some(j) = jobs.iter().find(|j| j.metadata.uid == r.uid)
            && job_finished(j).0
        {
            let cond = if job_finished(j).1 {
                "Complete"
            } else {
                "Failed"
            };
            ctx.events.event(
                cj.as_ref(),
                EventType::Normal,
                "SawCompletedJob",
                format!(
                    "Saw completed job: {}, condition: {cond}",
                    j.metadata.name.as_deref().unwrap_or_default()
                ),
            );
        }
    }
    let mut last_success = old_status.last_successful_time.clone();
    for j in &jobs {
        if job_finished(j).1
            && let Some(t) = j.status.as_ref().and_then(|s| s.completion_time.clone())
            && last_success.as_ref().is_none_or(|l| l.0 < t.0)
        {
            last_success = Some(t);
        }
    }
    let mut last_schedule = old_status.last_schedule_time.clone();

    let mut action = Action::await_change();
    if cj.metadata.deletion_timestamp.is_none() && spec.suspend != Some(true) {
        match (
            Schedule::parse(&spec.schedule),
            time_zone(spec.time_zone.as_deref()),
        ) {
            (Err(e), _) => {
                warn!(cronjob = %name, error = %e, "unparseable schedule");
                ctx.events.event(
                    cj.as_ref(),
                    EventType::Warning,
                    "InvalidSchedule",
                    format!("invalid schedule: {} : {e}", spec.schedule),
                );
            }
            (_, Err(e)) => {
                warn!(cronjob = %name, error = %e, "unknown time zone");
                ctx.events.event(
                    cj.as_ref(),
                    EventType::Warning,
                    "UnknownTimeZone",
                    format!(
                        "invalid timeZone: {:?}: {e}",
                        spec.time_zone.clone().unwrap_or_default()
                    ),
                );
            }
            (Ok(sched), Ok(tz)) => {
                let created = cj.metadata.creation_timestamp.as_ref().map_or(now, |t| t.0);
                let mut earliest = last_schedule.as_ref().map_or(created, |t| t.0);
                if let Some(d) = spec.starting_deadline_seconds {
                    let floor = now
                        .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(d))
                        .unwrap_or(now);
                    if floor > earliest {
                        earliest = floor;
                    }
                }
                let (scheduled, missed) = schedule::most_recent(&sched, earliest, now, &tz);
                if missed > TOO_MANY_MISSED {
                    warn!(cronjob = %name, missed, "too many missed start times; check clock skew");
                    ctx.events.event(
                        cj.as_ref(),
                        EventType::Warning,
                        "TooManyMissedTimes",
                        format!("too many missed start times: {missed}. Set or decrease .spec.startingDeadlineSeconds or check clock skew"),
                    );
                }
                let next = sched.next(now, &tz);
                action = requeue_at(next, now);
                if let Some(t) = scheduled {
                    let too_late = spec
                        .starting_deadline_seconds
                        .is_some_and(|d| t.as_second() + d < now.as_second());
                    let jname = job_name(&name, t);
                    let already = jobs
                        .iter()
                        .any(|j| j.metadata.name.as_deref() == Some(&jname));
                    let policy = spec.concurrency_policy.as_deref().unwrap_or("Allow");
                    if too_late {
                        info!(cronjob = %name, "missed scheduled time past startingDeadlineSeconds");
                        if last_schedule.as_ref().is_none_or(|l| l.0 < t) {
                            ctx.events.event(
                                cj.as_ref(),
                                EventType::Warning,
                                "MissSchedule",
                                format!(
                                    "Missed scheduled time to start a job: {}",
                                    t.to_zoned(tz.clone()).strftime("%Y-%m-%dT%H:%M:%S%:z")
                                ),
                            );
                        }
                    } else if already {
                        // Created by an earlier sync; only the status may lag.
                        last_schedule = Some(Time(t));
                    } else if policy == "Forbid" && !active.is_empty() {
                        info!(cronjob = %name, "JobAlreadyActive: not starting a new job");
                        ctx.events.event(
                            cj.as_ref(),
                            EventType::Normal,
                            "JobAlreadyActive",
                            "Not starting job because prior execution is running and concurrency policy is Forbid",
                        );
                    } else {
                        if policy == "Replace" {
                            for r in active.drain(..) {
                                let jn = r.name.clone().unwrap_or_default();
                                delete_job(&jobs_api, &jn).await?;
                                ctx.events.event(
                                    cj.as_ref(),
                                    EventType::Normal,
                                    "SuccessfulDelete",
                                    format!("Deleted job {jn}"),
                                );
                            }
                        }
                        let job = new_job(&cj, &jname, t, &tz);
                        match jobs_api.create(&PostParams::default(), &job).await {
                            Ok(j) => {
                                info!(cronjob = %name, job = %jname, "created job");
                                ctx.events.event(
                                    cj.as_ref(),
                                    EventType::Normal,
                                    "SuccessfulCreate",
                                    format!("Created job {jname}"),
                                );
                                active.push(job_ref(&j));
                            }
                            Err(kube::Error::Api(e)) if e.code == 409 => {}
                            Err(e) => {
                                ctx.events.event(
                                    cj.as_ref(),
                                    EventType::Warning,
                                    "FailedCreate",
                                    format!("Error creating job: {e}"),
                                );
                                return Err(e.into());
                            }
                        }
                        last_schedule = Some(Time(t));
                    }
                }
            }
        }
    }

    let status = json!({"status": {
        "active": if active.is_empty() { None } else { Some(&active) },
        "lastScheduleTime": last_schedule,
        "lastSuccessfulTime": last_success,
    }});
    let names = |v: &Option<Vec<ObjectReference>>| -> Vec<Option<String>> {
        v.iter().flatten().map(|r| r.uid.clone()).collect()
    };
    let changed = names(&old_status.active)
        != active.iter().map(|r| r.uid.clone()).collect::<Vec<_>>()
        || old_status.last_schedule_time != last_schedule
        || old_status.last_successful_time != last_success;
    if changed {
        match crate::statusupdate::update(&cj_api, cj.as_ref(), &status).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(Action::await_change()),
            Err(e) => return Err(e.into()),
        }
    }

    cleanup_history(
        &ctx,
        &cj,
        &jobs_api,
        &jobs,
        spec.successful_jobs_history_limit.unwrap_or(3),
        spec.failed_jobs_history_limit.unwrap_or(1),
    )
    .await?;
    Ok(action)
}

async fn delete_job(api: &Api<Job>, name: &str) -> Result<(), Error> {
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    match api.delete(name, &dp).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Deletes the oldest finished Jobs beyond each history limit.
async fn cleanup_history(
    ctx: &Ctx,
    cj: &CronJob,
    api: &Api<Job>,
    jobs: &[Job],
    successful: i32,
    failed: i32,
) -> Result<(), Error> {
    let start = |j: &&Job| {
        j.status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .or(j.metadata.creation_timestamp.as_ref())
            .map(|t| t.0)
    };
    for (want_success, limit) in [(true, successful), (false, failed)] {
        let mut done: Vec<&Job> = jobs
            .iter()
            .filter(|j| j.metadata.deletion_timestamp.is_none())
            .filter(|j| {
                let (fin, ok) = job_finished(j);
                fin && ok == want_success
            })
            .collect();
        done.sort_by_key(start);
        let excess = done
            .len()
            .saturating_sub(usize::try_from(limit.max(0)).unwrap_or(0));
        for j in done.into_iter().take(excess) {
            let n = j.metadata.name.clone().unwrap_or_default();
            delete_job(api, &n).await?;
            info!(job = %n, "deleted finished job beyond the history limit");
            ctx.events.event(
                cj,
                EventType::Normal,
                "SuccessfulDelete",
                format!("Deleted job {n}"),
            );
        }
    }
    Ok(())
}

/// Upstream's getJobFromTemplate2.
fn new_job(cj: &CronJob, name: &str, scheduled: Timestamp, tz: &TimeZone) -> Job {
    let tmpl = cj
        .spec
        .as_ref()
        .map(|s| s.job_template.clone())
        .unwrap_or_default();
    let meta = tmpl.metadata.unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    let stamp = scheduled.to_zoned(tz.clone());
    annotations.insert(
        SCHEDULED_TIMESTAMP.into(),
        stamp
            .strftime("%Y-%m-%dT%H:%M:%S%:z")
            .to_string()
            .replace("+00:00", "Z"),
    );
    Job {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: cj.metadata.namespace.clone(),
            labels: meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![owner_ref(cj)]),
            ..ObjectMeta::default()
        },
        spec: tmpl.spec,
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names_use_minutes_since_epoch() {
        let t: Timestamp = "2026-03-01T10:15:00Z".parse().unwrap_or_default();
        assert_eq!(
            job_name("hello", t),
            format!("hello-{}", t.as_second() / 60)
        );
        assert_eq!(job_name("hello", Timestamp::UNIX_EPOCH), "hello-0");
    }

    #[test]
    fn zones() {
        assert!(time_zone(None).is_ok());
        assert!(time_zone(Some("Etc/UTC")).is_ok());
        assert!(time_zone(Some("Not/AZone")).is_err());
    }

    #[test]
    fn scheduled_timestamp_annotation() {
        let cj = CronJob {
            metadata: ObjectMeta {
                name: Some("hello".into()),
                uid: Some("u".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let t: Timestamp = "2026-03-01T10:15:00Z".parse().unwrap_or_default();
        let j = new_job(&cj, "hello-1", t, &TimeZone::UTC);
        let a = j.metadata.annotations.unwrap_or_default();
        assert_eq!(
            a.get(SCHEDULED_TIMESTAMP).map(String::as_str),
            Some("2026-03-01T10:15:00Z")
        );
        assert_eq!(
            j.metadata.owner_references.unwrap_or_default()[0].kind,
            "CronJob"
        );
    }
}
