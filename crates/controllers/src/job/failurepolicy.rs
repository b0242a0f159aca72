//! `spec.podFailurePolicy` (upstream `pod_failure_policy.go`): the first rule
//! matching a failed pod decides whether the failure fails the whole Job
//! (`FailJob`), is not counted towards `backoffLimit` (`Ignore`), or counts
//! as usual (`Count`, and when no rule matches); `FailIndex` fails the pod's
//! index at once (with backoffLimitPerIndex).

use k8s_openapi::api::batch::v1::{PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

/// Reason of the FailureTarget/Failed conditions a FailJob rule sets.
pub const REASON: &str = "PodFailurePolicy";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Fail the Job with this condition message.
    FailJob(String),
    Ignore,
    Count,
    FailIndex,
}

fn exit_codes_match(
    req: &PodFailurePolicyOnExitCodesRequirement,
    statuses: &[ContainerStatus],
) -> Option<(String, i32)> {
    statuses
        .iter()
        .filter(|s| req.container_name.as_ref().is_none_or(|n| *n == s.name))
        .filter_map(|s| {
            let code = s.state.as_ref()?.terminated.as_ref()?.exit_code;
            (code != 0).then(|| (s.name.clone(), code))
        })
        .find(|(_, code)| {
            let listed = req.values.contains(code);
            match req.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                _ => false,
            }
        })
}

/// What the policy says about a pod that failed.
pub fn evaluate(policy: &PodFailurePolicy, pod: &Pod) -> Outcome {
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    let containers: Vec<ContainerStatus> = status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .cloned()
        .collect();
    for (i, rule) in policy.rules.iter().enumerate() {
        let message = if let Some(req) = &rule.on_exit_codes {
            exit_codes_match(req, &containers).map(|(c, code)| {
                format!(
                    "Container {c} for pod {ns}/{name} failed with exit code {code} matching {} rule at index {i}",
                    rule.action
                )
            })
        } else {
            rule.on_pod_conditions.iter().flatten().find_map(|pattern| {
                let want = if pattern.status.is_empty() {
                    "True"
                } else {
                    pattern.status.as_str()
                };
                status
                    .conditions
                    .iter()
                    .flatten()
                    .any(|c| c.type_ == pattern.type_ && c.status == want)
                    .then(|| {
                        format!(
                            "Pod {ns}/{name} has condition {} matching {} rule at index {i}",
                            pattern.type_, rule.action
                        )
                    })
            })
        };
        let Some(message) = message else {
            continue;
        };
        return match rule.action.as_str() {
            "FailJob" => Outcome::FailJob(message),
            "Ignore" => Outcome::Ignore,
            "FailIndex" => Outcome::FailIndex,
            _ => Outcome::Count,
        };
    }
    Outcome::Count
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{
        PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule,
    };
    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateTerminated, PodCondition, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn failed(container: &str, code: i32, condition: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            spec: None,
            status: Some(PodStatus {
                phase: Some("Failed".into()),
                container_statuses: Some(vec![ContainerStatus {
                    name: container.into(),
                    state: Some(ContainerState {
                        terminated: Some(ContainerStateTerminated {
                            exit_code: code,
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                conditions: condition.map(|t| {
                    vec![PodCondition {
                        type_: t.into(),
                        status: "True".into(),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
        }
    }

    fn codes(
        action: &str,
        container: Option<&str>,
        op: &str,
        values: &[i32],
    ) -> PodFailurePolicyRule {
        PodFailurePolicyRule {
            action: action.into(),
            on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                container_name: container.map(String::from),
                operator: op.into(),
                values: values.to_vec(),
            }),
            on_pod_conditions: None,
        }
    }

    fn condition(action: &str, type_: &str) -> PodFailurePolicyRule {
        PodFailurePolicyRule {
            action: action.into(),
            on_exit_codes: None,
            on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                type_: type_.into(),
                status: String::new(),
            }]),
        }
    }

    #[test]
    fn first_matching_rule_decides() {
        let policy = PodFailurePolicy {
            rules: vec![
                condition("Ignore", "DisruptionTarget"),
                codes("FailJob", Some("main"), "In", &[42]),
                codes("Count", None, "NotIn", &[1, 2]),
                codes("FailJob", None, "In", &[3]),
            ],
        };
        let cases = [
            (failed("main", 42, None), Outcome::FailJob(
                "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1".into(),
            )),
            (failed("main", 42, Some("DisruptionTarget")), Outcome::Ignore),
            (failed("sidecar", 42, None), Outcome::Count),
            (failed("main", 1, None), Outcome::Count),
            // 3 is NotIn [1, 2]: the Count rule at index 2 wins before FailJob at 3.
            (failed("main", 3, None), Outcome::Count),
        ];
        for (pod, want) in cases {
            assert_eq!(evaluate(&policy, &pod), want);
        }
        let only_fail = PodFailurePolicy {
            rules: vec![
                codes("FailJob", None, "In", &[3]),
                condition("FailJob", "ConfigIssue"),
            ],
        };
        assert_eq!(
            evaluate(&only_fail, &failed("main", 0, Some("ConfigIssue"))),
            Outcome::FailJob(
                "Pod ns/p has condition ConfigIssue matching FailJob rule at index 1".into()
            )
        );
        let fail_index = PodFailurePolicy {
            rules: vec![codes("FailIndex", None, "In", &[7])],
        };
        assert_eq!(
            evaluate(&fail_index, &failed("main", 7, None)),
            Outcome::FailIndex
        );
        // Exit code 0 never matches an exit-code rule.
        assert_eq!(
            evaluate(
                &PodFailurePolicy {
                    rules: vec![codes("FailJob", None, "NotIn", &[1])]
                },
                &failed("main", 0, None)
            ),
            Outcome::Count
        );
    }
}
