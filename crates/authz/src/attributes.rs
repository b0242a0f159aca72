//! The request as an authorizer sees it, and what an authorizer answers.

use berth_api::user::UserInfo;

/// One request as the authorizer sees it (upstream's `authorizer.Attributes`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    pub user: UserInfo,
    /// `get list watch create update patch delete deletecollection`, or
    /// `impersonate`, `bind`, `escalate`, `use`, …; for non-resource requests the
    /// lowercase HTTP verb (`get`, `post`, `put`, …).
    pub verb: String,
    /// "" when cluster-scoped or across all namespaces.
    pub namespace: String,
    /// "" for the core group.
    pub api_group: String,
    pub api_version: String,
    /// The plural resource, `pods`.
    pub resource: String,
    /// `log`, `status`, … or "".
    pub subresource: String,
    pub name: String,
    pub resource_request: bool,
    /// For non-resource requests, e.g. `/healthz`.
    pub path: String,
}

/// An authorizer's answer (upstream's `authorizer.Decision`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Reject without asking later authorizers.
    Deny,
    /// Let the next authorizer decide; the last one's NoOpinion is a 403.
    NoOpinion,
}
