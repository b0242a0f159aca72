//! Berth authorization (pure, no I/O, no async): upstream's RBAC authorizer
//! (`plugin/pkg/auth/authorizer/rbac`), its rule resolver and escalation check
//! (`pkg/registry/rbac/validation`), the ClusterRole aggregation computation
//! (`pkg/controller/clusterroleaggregation`), the 403 message the API server writes
//! (`responsewriters.forbiddenMessage`), and the bootstrap policy
//! (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy`).
//!
//! The API server builds one [`PolicyIndex`] from every Role, ClusterRole and
//! binding whenever one of them changes, and asks it about every request.

mod aggregate;
mod attributes;
pub mod bootstrap;
mod escalation;
mod forbidden;
mod index;
mod rule;

pub use aggregate::{aggregate, aggregate_all, rules_equal};
pub use attributes::{Attributes, Decision};
pub use escalation::{EscalationError, compact_string, covers};
pub use forbidden::forbidden_message;
pub use index::{PolicyIndex, RulesReview};
pub use rule::{rule_allows, rules_allow};
