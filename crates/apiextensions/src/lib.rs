//! The schema machinery of upstream's apiextensions-apiserver for
//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`). Pure: schemas and
//! objects are `serde_json::Value`s (the JSON of `openAPIV3Schema` and of the
//! custom object); errors are [`berth_api::validation::FieldError`]s in
//! upstream's wording.
//!
//! | module | upstream (k8s.io/apiextensions-apiserver, 1.33) |
//! |---|---|
//! | [`crd`] | `pkg/apis/apiextensions/validation` (CRD validation, without CEL compilation) |
//! | [`defaulting`] | `pkg/apiserver/schema/defaulting` (algorithm, prunenulls, validation) |
//! | [`pruning`] | `pkg/apiserver/schema/pruning`; `pkg/apiserver/schema/objectmeta` (coercion) |
//! | [`structural`] | `pkg/apiserver/schema` (convert.go `NewStructural`, validation.go, complete.go) |
//! | [`validation`] | `pkg/apiserver/validation` over kube-openapi `pkg/validation/validate`, `errors`, `strfmt`; `pkg/apiserver/schema/objectmeta` (validation); `pkg/apiserver/schema/listtype` |
//!
//! Every walk over user input is bounded by [`MAX_DEPTH`].

pub mod crd;
pub mod defaulting;
pub mod formats;
pub mod gofmt;
pub mod pruning;
mod schema;
pub mod structural;
pub mod validation;

pub use crd::{validate_crd, validate_crd_update};
pub use defaulting::{
    apply_defaults, prune_non_nullable_nulls_without_defaults, validate_defaults,
};
pub use pruning::{coerce_object_meta, prune, unknown_field_message};
pub use structural::validate_structural;
pub use validation::{
    validate_custom_resource, validate_embedded_resources, validate_list_sets_and_maps,
    validate_value,
};

/// How deep any schema or object walk goes before it stops (schemas and
/// objects are user input; serde_json parses at most 128 levels).
pub const MAX_DEPTH: usize = 256;
