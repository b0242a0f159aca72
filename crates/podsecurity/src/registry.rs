//! The evaluator (upstream's `policy/registry.go`): which checks run for a
//! level at a version, in upstream's order, and the aggregate result whose
//! `ForbiddenDetail` is the text of every PodSecurity message.

use serde_json::Value;

use crate::api::{Level, LevelVersion, Version};
use crate::checks::{self, Check, CheckPodFn};

/// One check's verdict (upstream's `CheckResult`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    pub allowed: bool,
    pub forbidden_reason: String,
    pub forbidden_detail: String,
}

impl CheckResult {
    pub fn allowed() -> Self {
        CheckResult {
            allowed: true,
            forbidden_reason: String::new(),
            forbidden_detail: String::new(),
        }
    }

    pub fn forbidden(reason: impl Into<String>, detail: impl Into<String>) -> Self {
        CheckResult {
            allowed: false,
            forbidden_reason: reason.into(),
            forbidden_detail: detail.into(),
        }
    }
}

/// Every check's verdict together (upstream's `AggregateCheckResult`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AggregateCheckResult {
    pub allowed: bool,
    pub forbidden_reasons: Vec<String>,
    pub forbidden_details: Vec<String>,
}

impl AggregateCheckResult {
    pub fn new(results: &[CheckResult]) -> Self {
        let mut a = AggregateCheckResult::default();
        for r in results.iter().filter(|r| !r.allowed) {
            a.forbidden_reasons.push(if r.forbidden_reason.is_empty() {
                "unknown forbidden reason".to_string()
            } else {
                r.forbidden_reason.clone()
            });
            a.forbidden_details.push(r.forbidden_detail.clone());
        }
        a.allowed = a.forbidden_reasons.is_empty();
        a
    }

    /// The reasons alone, comma-separated (the namespace-label warnings use it).
    pub fn forbidden_reason(&self) -> String {
        self.forbidden_reasons.join(", ")
    }

    /// `reason (detail), reason (detail)`: the body of every PodSecurity message.
    pub fn forbidden_detail(&self) -> String {
        self.forbidden_reasons
            .iter()
            .zip(&self.forbidden_details)
            .map(|(r, d)| {
                if d.is_empty() {
                    r.clone()
                } else {
                    format!("{r} ({d})")
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The checks by level and version.
#[derive(Debug, Clone)]
pub struct Evaluator {
    checks: Vec<Check>,
    /// The newest minimum version of any check: what `latest`, and any newer
    /// `v1.N`, evaluate as.
    max_version: u32,
}

impl Default for Evaluator {
    fn default() -> Self {
        Evaluator::new(checks::all())
    }
}

impl Evaluator {
    /// An evaluator over `checks`, ordered as upstream's: baseline checks by
    /// ID, then restricted checks by ID (byte order, as Go's sort).
    pub fn new(mut checks: Vec<Check>) -> Self {
        checks.sort_by(|a, b| {
            (a.level == Level::Restricted, a.id).cmp(&(b.level == Level::Restricted, b.id))
        });
        let max_version = checks
            .iter()
            .filter_map(|c| c.versions.last().map(|v| v.minimum_version))
            .max()
            .unwrap_or(0);
        Evaluator {
            checks,
            max_version,
        }
    }

    /// The check functions `lv` runs, in order: at restricted, the restricted
    /// checks and the baseline ones that no restricted check at that version
    /// overrides.
    pub fn checks_for(&self, lv: LevelVersion) -> Vec<(&'static str, CheckPodFn)> {
        let minor = match lv.version {
            Version::Latest => self.max_version,
            Version::V1(m) => m.min(self.max_version),
        };
        // Each check's version in effect at `minor`: the newest one not newer.
        let active: Vec<_> = self
            .checks
            .iter()
            .filter_map(|c| {
                c.versions
                    .iter()
                    .rev()
                    .find(|v| v.minimum_version <= minor)
                    .map(|v| (c, v))
            })
            .collect();
        match lv.level {
            Level::Privileged => Vec::new(),
            Level::Baseline => active
                .iter()
                .filter(|(c, _)| c.level == Level::Baseline)
                .map(|(c, v)| (c.id, v.check_pod))
                .collect(),
            Level::Restricted => {
                let overridden: Vec<&str> = active
                    .iter()
                    .filter(|(c, _)| c.level == Level::Restricted)
                    .flat_map(|(_, v)| v.override_check_ids.iter().copied())
                    .collect();
                active
                    .iter()
                    .filter(|(c, _)| !(c.level == Level::Baseline && overridden.contains(&c.id)))
                    .map(|(c, v)| (c.id, v.check_pod))
                    .collect()
            }
        }
    }

    /// Upstream's `EvaluatePod` over a pod's (or a template's) metadata and spec.
    pub fn evaluate_pod(
        &self,
        lv: LevelVersion,
        metadata: &Value,
        spec: &Value,
    ) -> Vec<CheckResult> {
        self.checks_for(lv)
            .into_iter()
            .map(|(_, f)| f(metadata, spec))
            .collect()
    }

    /// [`Evaluator::evaluate_pod`], aggregated.
    pub fn evaluate(
        &self,
        lv: LevelVersion,
        metadata: &Value,
        spec: &Value,
    ) -> AggregateCheckResult {
        AggregateCheckResult::new(&self.evaluate_pod(lv, metadata, spec))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn lv(level: Level, version: Version) -> LevelVersion {
        LevelVersion::new(level, version)
    }

    #[test]
    fn checks_run_in_upstreams_order_with_overrides() {
        let e = Evaluator::default();
        let ids = |l| {
            e.checks_for(l)
                .iter()
                .map(|(id, _)| *id)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids(lv(Level::Privileged, Version::Latest)),
            Vec::<&str>::new()
        );
        assert_eq!(
            ids(lv(Level::Baseline, Version::Latest)),
            [
                "appArmorProfile",
                "capabilities_baseline",
                "hostNamespaces",
                "hostPathVolumes",
                "hostPorts",
                "privileged",
                "procMount",
                "seLinuxOptions",
                "seccompProfile_baseline",
                "sysctls",
                "windowsHostProcess",
            ]
        );
        assert_eq!(
            ids(lv(Level::Restricted, Version::Latest)),
            [
                "appArmorProfile",
                "hostNamespaces",
                "hostPorts",
                "privileged",
                "procMount",
                "seLinuxOptions",
                "sysctls",
                "windowsHostProcess",
                "allowPrivilegeEscalation",
                "capabilities_restricted",
                "restrictedVolumes",
                "runAsNonRoot",
                "runAsUser",
                "seccompProfile_restricted",
            ]
        );
        // Before 1.22 restricted has no capabilities check of its own, so the
        // baseline one applies; before 1.19 no restricted seccomp check, and
        // before 1.8 no allowPrivilegeEscalation.
        assert_eq!(
            ids(lv(Level::Restricted, Version::V1(7))),
            [
                "appArmorProfile",
                "capabilities_baseline",
                "hostNamespaces",
                "hostPorts",
                "privileged",
                "procMount",
                "seLinuxOptions",
                "seccompProfile_baseline",
                "sysctls",
                "windowsHostProcess",
                "restrictedVolumes",
                "runAsNonRoot",
            ]
        );
    }

    /// A pod with nothing set, as `kubectl run` makes one.
    fn bare_pod() -> (Value, Value) {
        (
            json!({"name": "p"}),
            json!({"containers": [{"name": "c", "image": "busybox"}]}),
        )
    }

    #[test]
    fn versions_choose_the_checks_in_effect() {
        let e = Evaluator::default();
        let (meta, spec) = bare_pod();
        let cases = [
            (lv(Level::Baseline, Version::Latest), ""),
            (
                lv(Level::Restricted, Version::Latest),
                r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
            ),
            // A version newer than every check is evaluated as the newest.
            (
                lv(Level::Restricted, Version::V1(99)),
                r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "c" must set securityContext.capabilities.drop=["ALL"]), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
            ),
            (
                lv(Level::Restricted, Version::V1(21)),
                r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container "c" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")"#,
            ),
            (
                lv(Level::Restricted, Version::V1(18)),
                r#"allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), runAsNonRoot != true (pod or container "c" must set securityContext.runAsNonRoot=true)"#,
            ),
        ];
        for (l, want) in cases {
            let got = e.evaluate(l, &meta, &spec);
            assert_eq!(got.allowed, want.is_empty(), "{l}");
            assert_eq!(got.forbidden_detail(), want, "{l}");
        }
    }

    #[test]
    fn aggregate_formats_reasons_and_details() {
        let a = AggregateCheckResult::new(&[
            CheckResult::allowed(),
            CheckResult::forbidden("host namespaces", "hostNetwork=true"),
            CheckResult::forbidden("", ""),
        ]);
        assert!(!a.allowed);
        assert_eq!(
            a.forbidden_detail(),
            "host namespaces (hostNetwork=true), unknown forbidden reason"
        );
        assert_eq!(
            a.forbidden_reason(),
            "host namespaces, unknown forbidden reason"
        );
        assert!(AggregateCheckResult::new(&[CheckResult::allowed()]).allowed);
    }
}
