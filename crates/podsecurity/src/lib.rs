//! The Pod Security Standards as upstream's `k8s.io/pod-security-admission`
//! evaluates them: the levels (`privileged`, `baseline`, `restricted`), the
//! policy versions (`latest`, `v1.N`), the namespace labels that choose them
//! (`pod-security.kubernetes.io/enforce|audit|warn[-version]`), the
//! `PodSecurityConfiguration` of the admission plugin, and one module per check
//! under [`checks`] with upstream's check IDs, versions and messages.
//!
//! Pure: no I/O, no async. Pods are read as JSON (`metadata` and `spec`, as
//! Berth stores objects); a field of the wrong type reads as unset, as the
//! API server has validated the pod before admission sees it.
//!
//! Map to upstream:
//! - [`api`] is `pod-security-admission/api` (levels, versions, `PolicyToEvaluate`);
//! - [`registry`] is `policy/registry.go` and `policy/checks.go` (the
//!   evaluator and the aggregate `ForbiddenDetail` message);
//! - [`config`] is `admission/api` (PodSecurityConfiguration, its defaults and
//!   validation);
//! - [`checks`] is `policy/check_*.go`, as of Kubernetes 1.33 (the version
//!   Berth serves): `latest` evaluates the newest of these.

pub mod api;
pub mod checks;
pub mod config;
pub mod registry;

pub use api::{
    FieldError, FieldErrorType, Level, LevelVersion, Policy, Version, policy_to_evaluate,
};
pub use config::{Exemptions, PodSecurityConfiguration};
pub use registry::{AggregateCheckResult, CheckResult, Evaluator};
