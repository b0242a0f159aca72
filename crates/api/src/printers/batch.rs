//! `batch/v1` kinds.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::format::{
    arr, bool_ptr, container_cells, format_label_selector, get, int_at, name, opt_bool, opt_int,
    opt_str, since, str_at, time_at,
};
use super::{AGE, NAME, Printer, WIDE_CONTAINERS, WIDE_IMAGES, age, col, human_duration, wide};

pub(super) fn printer(kind: &str) -> Option<&'static Printer> {
    Some(match kind {
        "Job" => &JOB,
        "CronJob" => &CRON_JOB,
        _ => return None,
    })
}

const JOB_SELECTOR_DESC: &str = "A label query over pods that should match the pod count.";

static JOB: Printer = Printer {
    columns: &[
        NAME,
        col("Status", "string", "Status of the job."),
        col(
            "Completions",
            "string",
            "The number of pods which reached phase Succeeded.",
        ),
        col("Duration", "string", "Time required to complete the job."),
        AGE,
        WIDE_CONTAINERS,
        WIDE_IMAGES,
        wide("Selector", "string", JOB_SELECTOR_DESC),
    ],
    cells: job_cells,
};

/// Upstream `hasJobCondition`: the first condition of the type decides.
fn has_job_condition(job: &Value, type_: &str) -> bool {
    arr(job, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == type_)
        .is_some_and(|c| str_at(c, &["status"]) == "True")
}

fn job_status(job: &Value) -> &'static str {
    if has_job_condition(job, "Complete") {
        "Complete"
    } else if has_job_condition(job, "Failed") {
        "Failed"
    } else if get(job, &["metadata", "deletionTimestamp"]).is_some_and(|v| !v.is_null()) {
        "Terminating"
    } else if has_job_condition(job, "Suspended") {
        "Suspended"
    } else if has_job_condition(job, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    }
}

fn job_cells(job: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let succeeded = int_at(job, &["status", "succeeded"]);
    let completions = match opt_int(job, &["spec", "completions"]) {
        Some(c) => format!("{succeeded}/{c}"),
        None => match opt_int(job, &["spec", "parallelism"]).unwrap_or(0) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let duration = match (
        time_at(job, &["status", "startTime"]),
        time_at(job, &["status", "completionTime"]),
    ) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now - start),
        (Some(start), Some(end)) => human_duration(end - start),
    };
    let (names, images) = container_cells(arr(job, &["spec", "template", "spec", "containers"]));
    vec![
        name(job).into(),
        job_status(job).into(),
        completions.into(),
        duration.into(),
        age(job, now).into(),
        names.into(),
        images.into(),
        format_label_selector(get(job, &["spec", "selector"])).into(),
    ]
}

static CRON_JOB: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Schedule",
            "string",
            "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
        ),
        col(
            "Timezone",
            "string",
            "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones.",
        ),
        col(
            "Suspend",
            "boolean",
            "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.",
        ),
        col(
            "Active",
            "integer",
            "A list of pointers to currently running jobs.",
        ),
        col(
            "Last Schedule",
            "string",
            "Information when was the last time the job was successfully scheduled.",
        ),
        AGE,
        WIDE_CONTAINERS,
        WIDE_IMAGES,
        wide("Selector", "string", JOB_SELECTOR_DESC),
    ],
    cells: |cj, now| {
        let (names, images) = container_cells(arr(
            cj,
            &[
                "spec",
                "jobTemplate",
                "spec",
                "template",
                "spec",
                "containers",
            ],
        ));
        let last_schedule = match get(cj, &["status", "lastScheduleTime"]).filter(|v| !v.is_null())
        {
            Some(_) => since(time_at(cj, &["status", "lastScheduleTime"]), now),
            None => "<none>".to_string(),
        };
        vec![
            name(cj).into(),
            str_at(cj, &["spec", "schedule"]).into(),
            opt_str(cj, &["spec", "timeZone"])
                .unwrap_or("<none>")
                .into(),
            // Upstream prints the pointer as a string despite the boolean column type.
            bool_ptr(opt_bool(cj, &["spec", "suspend"])).into(),
            arr(cj, &["status", "active"]).len().into(),
            last_schedule.into(),
            age(cj, now).into(),
            names.into(),
            images.into(),
            format_label_selector(get(cj, &["spec", "jobTemplate", "spec", "selector"])).into(),
        ]
    },
};

#[cfg(test)]
mod tests {
    use super::super::testutil::{ago, now};
    use super::*;
    use serde_json::json;

    fn job(spec: Value, status: Value) -> Value {
        let mut spec = spec;
        spec["template"] = json!({"spec": {"containers": [{"name": "pi", "image": "perl"}]}});
        json!({"metadata": {"name": "pi", "creationTimestamp": ago(600)}, "spec": spec, "status": status})
    }

    #[test]
    fn job_rows() {
        let sel = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "abc"}});
        let cases = [
            (
                job(
                    json!({"completions": 1, "selector": sel}),
                    json!({"succeeded": 1, "startTime": ago(600), "completionTime": ago(590),
                "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]}),
                ),
                json!([
                    "pi",
                    "Complete",
                    "1/1",
                    "10s",
                    "10m",
                    "pi",
                    "perl",
                    "batch.kubernetes.io/controller-uid=abc"
                ]),
            ),
            (
                job(
                    json!({"completions": 5, "parallelism": 2}),
                    json!({"succeeded": 2, "startTime": ago(190)}),
                ),
                json!([
                    "pi", "Running", "2/5", "3m10s", "10m", "pi", "perl", "<none>"
                ]),
            ),
            (
                job(json!({"parallelism": 3}), json!({})),
                json!([
                    "pi", "Running", "0/1 of 3", "", "10m", "pi", "perl", "<none>"
                ]),
            ),
            (
                job(
                    json!({}),
                    json!({"conditions": [{"type": "Failed", "status": "True"}], "startTime": ago(60), "completionTime": ago(1)}),
                ),
                json!(["pi", "Failed", "0/1", "59s", "10m", "pi", "perl", "<none>"]),
            ),
            (
                job(
                    json!({"suspend": true}),
                    json!({"conditions": [{"type": "Suspended", "status": "True"}]}),
                ),
                json!(["pi", "Suspended", "0/1", "", "10m", "pi", "perl", "<none>"]),
            ),
            (
                job(
                    json!({}),
                    json!({"conditions": [{"type": "FailureTarget", "status": "True"}]}),
                ),
                json!([
                    "pi",
                    "FailureTarget",
                    "0/1",
                    "",
                    "10m",
                    "pi",
                    "perl",
                    "<none>"
                ]),
            ),
            // A False Complete condition does not count.
            (
                job(
                    json!({"completions": 1}),
                    json!({"conditions": [{"type": "Complete", "status": "False"}]}),
                ),
                json!(["pi", "Running", "0/1", "", "10m", "pi", "perl", "<none>"]),
            ),
        ];
        for (j, want) in cases {
            assert_eq!(Value::from(job_cells(&j, now())), want, "{j}");
        }
        let mut deleting = job(json!({}), json!({}));
        deleting["metadata"]["deletionTimestamp"] = json!(ago(1));
        assert_eq!(job_cells(&deleting, now())[1], json!("Terminating"));
    }

    #[test]
    fn cron_job_rows() {
        let cj = json!({"metadata": {"name": "hello", "creationTimestamp": ago(3600)},
            "spec": {"schedule": "*/1 * * * *", "timeZone": "Etc/UTC", "suspend": false,
                     "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "hello", "image": "busybox"}]}}}}},
            "status": {"active": [{"name": "hello-1"}], "lastScheduleTime": ago(30)}});
        assert_eq!(
            Value::from((CRON_JOB.cells)(&cj, now())),
            json!([
                "hello",
                "*/1 * * * *",
                "Etc/UTC",
                "False",
                1,
                "30s",
                "60m",
                "hello",
                "busybox",
                "<none>"
            ])
        );
        let bare = json!({"metadata": {"name": "c"}, "spec": {"schedule": "@daily"}});
        assert_eq!(
            Value::from((CRON_JOB.cells)(&bare, now())),
            json!([
                "c",
                "@daily",
                "<none>",
                "<unset>",
                0,
                "<none>",
                "<unknown>",
                "",
                "",
                "<none>"
            ])
        );
    }
}
