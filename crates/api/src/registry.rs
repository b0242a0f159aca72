//! The served resource types: what discovery lists, what the REST layer routes,
//! and how each body is decoded (through its k8s-openapi type).

use k8s_openapi::api;
use k8s_openapi::schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::Value;

use crate::validation::{FieldError, NameRule, by_kind};

/// A kind's own validation, after the metadata checks every object gets
/// (`old` is the stored object on update).
pub type Validate = fn(&Value, Option<&Value>) -> Vec<FieldError>;

/// Which REST strategy a resource's writes go through (upstream's
/// `pkg/registry/<group>/<kind>/strategy.go`): the create/update mutations
/// [`crate::defaults::prepare_for_create`] makes, and the API server's hooks
/// (its `strategy/` table maps each to one). Facts that are plain data
/// (generation, status, names, validation) are fields of [`ResourceType`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Nothing beyond the registry entry's facts.
    Default,
    Namespace,
    Pod,
    Service,
    PersistentVolume,
    PersistentVolumeClaim,
    VolumeAttachment,
    Job,
    CertificateSigningRequest,
    /// Mutating- and ValidatingWebhookConfiguration.
    WebhookConfiguration,
    ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding,
    APIService,
    CustomResourceDefinition,
    /// A custom resource: its CustomResourceDefinition decides.
    CustomResource,
}

/// One served resource at one group-version.
#[derive(Debug)]
pub struct ResourceType {
    /// "" for the core group.
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub list_kind: &'static str,
    /// The URL path segment, e.g. `pods`.
    pub plural: &'static str,
    pub singular: &'static str,
    pub namespaced: bool,
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// Subresources served under `<plural>/<name>/<sub>`.
    pub subresources: &'static [&'static str],
    pub verbs: &'static [&'static str],
    /// The group and version objects of this resource are stored in; other
    /// versions (and core/v1 ↔ events.k8s.io/v1 Events) are converted on the way
    /// in and out, and share one storage prefix.
    pub storage_group: &'static str,
    pub storage_version: &'static str,
    /// The plural of the stored resource.
    pub storage_plural: &'static str,
    /// Decodes JSON into the typed struct and back: unknown fields are dropped,
    /// wrong types are an error (as upstream's decoder does).
    pub roundtrip: fn(Value) -> Result<Value, serde_json::Error>,
    /// The OpenAPI schema of the kind (with descriptions).
    pub schema: fn(&mut SchemaGenerator) -> Schema,
    /// The Rust type's schema name, the key under `components.schemas`.
    pub schema_name: fn() -> std::borrow::Cow<'static, str>,
    /// A custom resource: what its CustomResourceDefinition says about this
    /// version (schema, printer columns, scale paths). `None` for built-in kinds.
    pub custom: Option<&'static crate::crd::CustomResource>,
    /// The rule `metadata.name` (and `generateName`) follows.
    pub name_rule: NameRule,
    /// Finalizer names must be standard or domain-prefixed, as upstream checks
    /// built-in kinds; CustomResourceDefinitions and custom resources get
    /// apimachinery's generic rule (any qualified name).
    pub kube_finalizers: bool,
    /// `metadata.generation` starts at 1 (with an empty status) on create and
    /// moves when the spec changes.
    pub tracks_generation: bool,
    /// Status is owned by controllers: a main-resource update keeps it from the
    /// stored object (it changes through `/status`).
    pub keeps_status: bool,
    /// The kind's own validation; `None`: metadata only.
    pub validate: Option<Validate>,
    pub strategy: Strategy,
}

impl PartialEq for ResourceType {
    /// The same served resource (custom ones are rebuilt with new facts).
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl ResourceType {
    /// The name of the kind's schema under `components.schemas`: the Rust type's
    /// for built-in kinds, upstream's `<reversed group>.<version>.<Kind>` for
    /// custom ones (`com.example.stable.v1.CronTab`).
    pub fn schema_name_of(&self) -> std::borrow::Cow<'static, str> {
        if self.custom.is_none() {
            return (self.schema_name)();
        }
        let reversed: Vec<&str> = self.group.split('.').rev().collect();
        std::borrow::Cow::Owned(format!(
            "{}.{}.{}",
            reversed.join("."),
            self.version,
            self.kind
        ))
    }

    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `deployments.apps`: the name RBAC, storage keys and messages use.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    pub fn has_subresource(&self, sub: &str) -> bool {
        self.subresources.contains(&sub)
    }

    pub fn is_storage_version(&self) -> bool {
        self.group == self.storage_group && self.version == self.storage_version
    }

    /// The group-resource objects are stored under (`events` for both Event APIs).
    pub fn storage_group_resource(&self) -> String {
        if self.storage_group.is_empty() {
            self.storage_plural.to_string()
        } else {
            format!("{}.{}", self.storage_plural, self.storage_group)
        }
    }
}

pub(crate) const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const VERBS_NO_COLLECTION_DELETE: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];
const ALL: &[&str] = &["all"];
const STATUS: &[&str] = &["status"];
const STATUS_SCALE: &[&str] = &["status", "scale"];
const POD_SUBRESOURCES: &[&str] = &[
    "status",
    "log",
    "exec",
    "attach",
    "portforward",
    "binding",
    "eviction",
    "ephemeralcontainers",
    // `resize` (in-place pod resize) is not served until the node agent can
    // apply it: listed, it would only ever answer that resources are immutable.
    "proxy",
];

fn roundtrip<T: serde::de::DeserializeOwned + serde::Serialize>(
    v: Value,
) -> Result<Value, serde_json::Error> {
    let typed: T = serde_json::from_value(v)?;
    serde_json::to_value(typed)
}

/// A built-in resource of type `T`, every fact at its default (the plain
/// strategy, names as DNS subdomains, stored as its own group-version).
const fn typed<
    T: k8s_openapi::Resource + JsonSchema + serde::de::DeserializeOwned + serde::Serialize,
>(
    list_kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    namespaced: bool,
) -> ResourceType {
    ResourceType {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        list_kind,
        plural,
        singular,
        namespaced,
        short_names: NONE,
        categories: NONE,
        subresources: NONE,
        verbs: VERBS,
        storage_group: T::GROUP,
        storage_version: T::VERSION,
        storage_plural: plural,
        roundtrip: roundtrip::<T>,
        schema: T::json_schema,
        schema_name: T::schema_name,
        custom: None,
        name_rule: NameRule::Subdomain,
        kube_finalizers: true,
        tracks_generation: false,
        keeps_status: false,
        validate: None,
        strategy: Strategy::Default,
    }
}

/// One registry entry: the type, its names and scope, then any other
/// [`ResourceType`] field that differs from [`typed`]'s defaults.
macro_rules! resource {
    ($ty:ty, $plural:literal, $singular:literal, $namespaced:expr, short: $short:expr, cat: $cat:expr, sub: $sub:expr $(, $field:ident: $val:expr)* $(,)?) => {
        ResourceType {
            short_names: $short,
            categories: $cat,
            subresources: $sub,
            $($field: $val,)*
            ..typed::<$ty>(<$ty as k8s_openapi::ListableResource>::LIST_KIND, $plural, $singular, $namespaced)
        }
    };
}

/// A create-only kind that is never stored (reviews): the request is answered
/// with the object and its `status` filled, as upstream's review endpoints.
macro_rules! review {
    ($ty:ty, $plural:literal, $singular:literal, $namespaced:expr) => {
        ResourceType {
            verbs: CREATE_ONLY,
            ..typed::<$ty>("", $plural, $singular, $namespaced)
        }
    };
}

const CREATE_ONLY: &[&str] = &["create"];

impl ResourceType {
    /// A kind that is only ever created and answered, never stored or listed
    /// (TokenReview, SubjectAccessReview, …).
    pub fn is_review(&self) -> bool {
        self.list_kind.is_empty()
    }
}

/// autoscaling/v2beta2 HorizontalPodAutoscaler. k8s-openapi (1.33) has no v2beta2
/// types; upstream's v2beta2 and v2 HPA have the same JSON shape except that v2 added
/// `HPAScalingRules.tolerance` (1.33, alpha), so bodies decode through the v2 type with
/// `tolerance` dropped as unknown, and the schema is v2's under v2beta2 names
/// ([`crate::openapi`] renames it and restores v2beta2's `HPAScalingRules`).
const HPA_V2BETA2: ResourceType = ResourceType {
    group: "autoscaling",
    version: "v2beta2",
    kind: "HorizontalPodAutoscaler",
    list_kind: "HorizontalPodAutoscalerList",
    plural: "horizontalpodautoscalers",
    singular: "horizontalpodautoscaler",
    namespaced: NS,
    short_names: &["hpa"],
    categories: ALL,
    subresources: STATUS,
    verbs: VERBS,
    storage_group: "autoscaling",
    storage_version: "v2",
    storage_plural: "horizontalpodautoscalers",
    roundtrip: roundtrip_hpa_v2beta2,
    schema: <api::autoscaling::v2::HorizontalPodAutoscaler as k8s_openapi::schemars::JsonSchema>::json_schema,
    schema_name: hpa_v2beta2_schema_name,
    custom: None,
    name_rule: NameRule::Subdomain,
    kube_finalizers: true,
    tracks_generation: true,
    keeps_status: true,
    validate: Some(by_kind::horizontal_pod_autoscaler),
    strategy: Strategy::Default,
};

/// The v2beta2 HPA's schema name, upstream's (`io.k8s.api.autoscaling.v2beta2.…`).
pub const HPA_V2BETA2_SCHEMA: &str = "io.k8s.api.autoscaling.v2beta2.HorizontalPodAutoscaler";

fn hpa_v2beta2_schema_name() -> std::borrow::Cow<'static, str> {
    std::borrow::Cow::Borrowed(HPA_V2BETA2_SCHEMA)
}

/// Decodes through the v2 type, then drops what v2beta2 lacks (`tolerance` in the
/// scaling rules), so strict field validation reports it as an unknown field.
fn roundtrip_hpa_v2beta2(mut v: Value) -> Result<Value, serde_json::Error> {
    // k8s-openapi's decoder insists on the type's own apiVersion.
    if let Some(m) = v.as_object_mut()
        && m.get("apiVersion").and_then(Value::as_str) == Some("autoscaling/v2beta2")
    {
        m.insert("apiVersion".into(), Value::from("autoscaling/v2"));
    }
    let mut out = roundtrip::<api::autoscaling::v2::HorizontalPodAutoscaler>(v)?;
    crate::conversion::strip_v2_only_hpa_fields(&mut out);
    if let Some(m) = out.as_object_mut() {
        m.insert("apiVersion".into(), Value::from("autoscaling/v2beta2"));
    }
    Ok(out)
}

/// networking.k8s.io/v1beta1 Ingress and IngressClass: removed upstream in 1.22,
/// served here for the seed article's manifests, stored as v1
/// ([`crate::networking`] converts). k8s-openapi has no v1beta1 types: bodies decode
/// through v1's, and the schema is v1's under v1beta1 names with v1beta1's backend
/// shape ([`crate::openapi`] renames and reshapes it).
const INGRESS_CLASS_V1BETA1: ResourceType = ResourceType {
    group: "networking.k8s.io",
    version: "v1beta1",
    kind: "IngressClass",
    list_kind: "IngressClassList",
    plural: "ingressclasses",
    singular: "ingressclass",
    namespaced: CLUSTER,
    short_names: NONE,
    categories: NONE,
    subresources: NONE,
    verbs: VERBS,
    storage_group: "networking.k8s.io",
    storage_version: "v1",
    storage_plural: "ingressclasses",
    roundtrip: crate::networking::roundtrip_ingress_class_v1beta1,
    schema: <api::networking::v1::IngressClass as k8s_openapi::schemars::JsonSchema>::json_schema,
    schema_name: ingress_class_v1beta1_schema_name,
    custom: None,
    name_rule: NameRule::Subdomain,
    kube_finalizers: true,
    tracks_generation: false,
    keeps_status: false,
    validate: Some(by_kind::ingress_class),
    strategy: Strategy::Default,
};

const INGRESS_V1BETA1: ResourceType = ResourceType {
    group: "networking.k8s.io",
    version: "v1beta1",
    kind: "Ingress",
    list_kind: "IngressList",
    plural: "ingresses",
    singular: "ingress",
    namespaced: NS,
    short_names: &["ing"],
    categories: NONE,
    subresources: STATUS,
    verbs: VERBS,
    storage_group: "networking.k8s.io",
    storage_version: "v1",
    storage_plural: "ingresses",
    roundtrip: crate::networking::roundtrip_ingress_v1beta1,
    schema: <api::networking::v1::Ingress as k8s_openapi::schemars::JsonSchema>::json_schema,
    schema_name: ingress_v1beta1_schema_name,
    custom: None,
    name_rule: NameRule::Subdomain,
    kube_finalizers: true,
    tracks_generation: true,
    keeps_status: true,
    validate: Some(by_kind::ingress),
    strategy: Strategy::Default,
};

fn ingress_class_v1beta1_schema_name() -> std::borrow::Cow<'static, str> {
    std::borrow::Cow::Borrowed("io.k8s.api.networking.v1beta1.IngressClass")
}

fn ingress_v1beta1_schema_name() -> std::borrow::Cow<'static, str> {
    std::borrow::Cow::Borrowed("io.k8s.api.networking.v1beta1.Ingress")
}

const NS: bool = true;
const CLUSTER: bool = false;
const NONE: &[&str] = &[];

/// Every served resource. Order is discovery order within a group; groups appear
/// in the order of their first resource (upstream's preferred order: core first).
pub static RESOURCES: &[ResourceType] = &[
    // core/v1
    resource!(api::core::v1::ConfigMap, "configmaps", "configmap", NS, short: &["cm"], cat: NONE, sub: NONE, validate: Some(by_kind::config_map)),
    resource!(api::core::v1::Endpoints, "endpoints", "endpoints", NS, short: &["ep"], cat: NONE, sub: NONE),
    resource!(api::core::v1::Event, "events", "event", NS, short: &["ev"], cat: NONE, sub: NONE),
    resource!(api::core::v1::LimitRange, "limitranges", "limitrange", NS, short: &["limits"], cat: NONE, sub: NONE, validate: Some(by_kind::limit_range)),
    resource!(api::core::v1::Namespace, "namespaces", "namespace", CLUSTER, short: &["ns"], cat: NONE, sub: &["status", "finalize"], verbs: VERBS_NO_COLLECTION_DELETE, name_rule: NameRule::Label, keeps_status: true, validate: Some(by_kind::namespace), strategy: Strategy::Namespace),
    resource!(api::core::v1::Node, "nodes", "node", CLUSTER, short: &["no"], cat: NONE, sub: &["status", "proxy"], keeps_status: true),
    resource!(api::core::v1::PersistentVolumeClaim, "persistentvolumeclaims", "persistentvolumeclaim", NS, short: &["pvc"], cat: NONE, sub: STATUS, keeps_status: true, validate: Some(by_kind::persistent_volume_claim), strategy: Strategy::PersistentVolumeClaim),
    resource!(api::core::v1::PersistentVolume, "persistentvolumes", "persistentvolume", CLUSTER, short: &["pv"], cat: NONE, sub: STATUS, keeps_status: true, validate: Some(by_kind::persistent_volume), strategy: Strategy::PersistentVolume),
    resource!(api::core::v1::Pod, "pods", "pod", NS, short: &["po"], cat: ALL, sub: POD_SUBRESOURCES, keeps_status: true, validate: Some(by_kind::pod), strategy: Strategy::Pod),
    resource!(api::core::v1::PodTemplate, "podtemplates", "podtemplate", NS, short: NONE, cat: NONE, sub: NONE, validate: Some(by_kind::pod_template)),
    resource!(api::core::v1::ReplicationController, "replicationcontrollers", "replicationcontroller", NS, short: &["rc"], cat: ALL, sub: STATUS_SCALE, tracks_generation: true, keeps_status: true, validate: Some(by_kind::replication_controller)),
    resource!(api::core::v1::ResourceQuota, "resourcequotas", "resourcequota", NS, short: &["quota"], cat: NONE, sub: STATUS, keeps_status: true, validate: Some(by_kind::resource_quota)),
    resource!(api::core::v1::Secret, "secrets", "secret", NS, short: NONE, cat: NONE, sub: NONE, validate: Some(by_kind::secret)),
    resource!(api::core::v1::ServiceAccount, "serviceaccounts", "serviceaccount", NS, short: &["sa"], cat: NONE, sub: &["token"]),
    resource!(api::core::v1::Service, "services", "service", NS, short: &["svc"], cat: ALL, sub: &["status", "proxy"], name_rule: NameRule::Dns1035Label, keeps_status: true, validate: Some(by_kind::service), strategy: Strategy::Service),
    // apps/v1
    resource!(api::apps::v1::ControllerRevision, "controllerrevisions", "controllerrevision", NS, short: NONE, cat: NONE, sub: NONE),
    resource!(api::apps::v1::DaemonSet, "daemonsets", "daemonset", NS, short: &["ds"], cat: ALL, sub: STATUS, tracks_generation: true, keeps_status: true, validate: Some(by_kind::daemon_set)),
    resource!(api::apps::v1::Deployment, "deployments", "deployment", NS, short: &["deploy"], cat: ALL, sub: STATUS_SCALE, tracks_generation: true, keeps_status: true, validate: Some(by_kind::deployment)),
    resource!(api::apps::v1::ReplicaSet, "replicasets", "replicaset", NS, short: &["rs"], cat: ALL, sub: STATUS_SCALE, tracks_generation: true, keeps_status: true, validate: Some(by_kind::replica_set)),
    resource!(api::apps::v1::StatefulSet, "statefulsets", "statefulset", NS, short: &["sts"], cat: ALL, sub: STATUS_SCALE, tracks_generation: true, keeps_status: true, validate: Some(by_kind::stateful_set)),
    // autoscaling: v2 is the storage version; v1 is converted.
    resource!(api::autoscaling::v2::HorizontalPodAutoscaler, "horizontalpodautoscalers", "horizontalpodautoscaler", NS, short: &["hpa"], cat: ALL, sub: STATUS, tracks_generation: true, keeps_status: true, validate: Some(by_kind::horizontal_pod_autoscaler)),
    resource!(api::autoscaling::v1::HorizontalPodAutoscaler, "horizontalpodautoscalers", "horizontalpodautoscaler", NS, short: &["hpa"], cat: ALL, sub: STATUS, storage_version: "v2", tracks_generation: true, keeps_status: true, validate: Some(by_kind::horizontal_pod_autoscaler)),
    // autoscaling/v2beta2: removed upstream in 1.26, served here (last, so never
    // preferred) for the seed article's `kubectl explain … --api-version=autoscaling/v2beta2`.
    HPA_V2BETA2,
    // batch/v1
    resource!(api::batch::v1::CronJob, "cronjobs", "cronjob", NS, short: &["cj"], cat: ALL, sub: STATUS, tracks_generation: true, keeps_status: true, validate: Some(by_kind::cron_job)),
    resource!(api::batch::v1::Job, "jobs", "job", NS, short: NONE, cat: ALL, sub: STATUS, tracks_generation: true, keeps_status: true, validate: Some(by_kind::job), strategy: Strategy::Job),
    // certificates.k8s.io/v1: `approval` changes only the Approved/Denied
    // conditions, `status` the issued certificate (kubelet TLS bootstrapping).
    resource!(api::certificates::v1::CertificateSigningRequest, "certificatesigningrequests", "certificatesigningrequest", CLUSTER, short: &["csr"], cat: NONE, sub: &["status", "approval"], strategy: Strategy::CertificateSigningRequest),
    // authentication.k8s.io/v1 and authorization.k8s.io/v1: reviews, never stored.
    review!(
        api::authentication::v1::SelfSubjectReview,
        "selfsubjectreviews",
        "selfsubjectreview",
        CLUSTER
    ),
    review!(
        api::authentication::v1::TokenReview,
        "tokenreviews",
        "tokenreview",
        CLUSTER
    ),
    review!(
        api::authorization::v1::LocalSubjectAccessReview,
        "localsubjectaccessreviews",
        "localsubjectaccessreview",
        NS
    ),
    review!(
        api::authorization::v1::SelfSubjectAccessReview,
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        CLUSTER
    ),
    review!(
        api::authorization::v1::SelfSubjectRulesReview,
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        CLUSTER
    ),
    review!(
        api::authorization::v1::SubjectAccessReview,
        "subjectaccessreviews",
        "subjectaccessreview",
        CLUSTER
    ),
    resource!(api::coordination::v1::Lease, "leases", "lease", NS, short: NONE, cat: NONE, sub: NONE),
    resource!(api::discovery::v1::EndpointSlice, "endpointslices", "endpointslice", NS, short: NONE, cat: NONE, sub: NONE),
    // events.k8s.io/v1 Events are core/v1 Events in storage, as upstream.
    // admissionregistration.k8s.io/v1: dynamic admission (the API server's
    // MutatingAdmissionWebhook and ValidatingAdmissionWebhook plugins call them).
    resource!(api::admissionregistration::v1::MutatingWebhookConfiguration, "mutatingwebhookconfigurations", "mutatingwebhookconfiguration", CLUSTER, short: NONE, cat: &["api-extensions"], sub: NONE, strategy: Strategy::WebhookConfiguration),
    resource!(api::admissionregistration::v1::ValidatingWebhookConfiguration, "validatingwebhookconfigurations", "validatingwebhookconfiguration", CLUSTER, short: NONE, cat: &["api-extensions"], sub: NONE, strategy: Strategy::WebhookConfiguration),
    // The ValidatingAdmissionPolicy plugin evaluates these (CEL, no webhook).
    resource!(api::admissionregistration::v1::ValidatingAdmissionPolicy, "validatingadmissionpolicies", "validatingadmissionpolicy", CLUSTER, short: NONE, cat: &["api-extensions"], sub: STATUS, tracks_generation: true, keeps_status: true, strategy: Strategy::ValidatingAdmissionPolicy),
    resource!(api::admissionregistration::v1::ValidatingAdmissionPolicyBinding, "validatingadmissionpolicybindings", "validatingadmissionpolicybinding", CLUSTER, short: NONE, cat: &["api-extensions"], sub: NONE, strategy: Strategy::ValidatingAdmissionPolicyBinding),
    // apiregistration.k8s.io/v1: who serves each group-version (the API server's
    // aggregator proxies remote ones).
    resource!(k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService, "apiservices", "apiservice", CLUSTER, short: NONE, cat: &["api-extensions"], sub: STATUS, keeps_status: true, strategy: Strategy::APIService),
    // apiextensions.k8s.io/v1: CustomResourceDefinitions; their resources are
    // served from the custom set below once Established (`crd.rs`).
    resource!(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition, "customresourcedefinitions", "customresourcedefinition", CLUSTER, short: &["crd", "crds"], cat: &["api-extensions"], sub: STATUS, kube_finalizers: false, tracks_generation: true, keeps_status: true, strategy: Strategy::CustomResourceDefinition),
    resource!(api::events::v1::Event, "events", "event", NS, short: &["ev"], cat: NONE, sub: NONE, storage_group: "", storage_version: "v1"),
    // networking.k8s.io/v1
    resource!(api::networking::v1::IngressClass, "ingressclasses", "ingressclass", CLUSTER, short: NONE, cat: NONE, sub: NONE, validate: Some(by_kind::ingress_class)),
    resource!(api::networking::v1::Ingress, "ingresses", "ingress", NS, short: &["ing"], cat: NONE, sub: STATUS, tracks_generation: true, keeps_status: true, validate: Some(by_kind::ingress)),
    resource!(api::networking::v1::NetworkPolicy, "networkpolicies", "networkpolicy", NS, short: &["netpol"], cat: NONE, sub: NONE, tracks_generation: true, keeps_status: true),
    // networking.k8s.io/v1beta1 (after v1, so never preferred), stored as v1.
    INGRESS_CLASS_V1BETA1,
    INGRESS_V1BETA1,
    resource!(api::policy::v1::PodDisruptionBudget, "poddisruptionbudgets", "poddisruptionbudget", NS, short: &["pdb"], cat: NONE, sub: STATUS, tracks_generation: true, keeps_status: true),
    // rbac.authorization.k8s.io/v1 (enforced by the API server's RBAC authorizer)
    resource!(api::rbac::v1::ClusterRoleBinding, "clusterrolebindings", "clusterrolebinding", CLUSTER, short: NONE, cat: NONE, sub: NONE, name_rule: NameRule::PathSegment),
    resource!(api::rbac::v1::ClusterRole, "clusterroles", "clusterrole", CLUSTER, short: NONE, cat: NONE, sub: NONE, name_rule: NameRule::PathSegment),
    resource!(api::rbac::v1::RoleBinding, "rolebindings", "rolebinding", NS, short: NONE, cat: NONE, sub: NONE, name_rule: NameRule::PathSegment),
    resource!(api::rbac::v1::Role, "roles", "role", NS, short: NONE, cat: NONE, sub: NONE, name_rule: NameRule::PathSegment),
    resource!(api::scheduling::v1::PriorityClass, "priorityclasses", "priorityclass", CLUSTER, short: &["pc"], cat: NONE, sub: NONE),
    // storage.k8s.io/v1
    resource!(api::storage::v1::CSIDriver, "csidrivers", "csidriver", CLUSTER, short: NONE, cat: NONE, sub: NONE, validate: Some(by_kind::csi_driver)),
    resource!(api::storage::v1::CSINode, "csinodes", "csinode", CLUSTER, short: NONE, cat: NONE, sub: NONE, validate: Some(by_kind::csi_node)),
    resource!(api::storage::v1::StorageClass, "storageclasses", "storageclass", CLUSTER, short: &["sc"], cat: NONE, sub: NONE, validate: Some(by_kind::storage_class)),
    resource!(api::storage::v1::VolumeAttachment, "volumeattachments", "volumeattachment", CLUSTER, short: NONE, cat: NONE, sub: STATUS, keeps_status: true, validate: Some(by_kind::volume_attachment), strategy: Strategy::VolumeAttachment),
];

/// A served API group with its versions, preferred first.
#[derive(Debug, Clone)]
pub struct Group {
    pub name: &'static str,
    pub versions: Vec<&'static str>,
}

/// The custom resources served now (one entry per served version of every
/// Established CustomResourceDefinition), replaced whole by the API server's
/// CRD controller. The only mutable part of the registry: lookups see the
/// built-in [`RESOURCES`] first, so a CRD can never shadow a built-in kind.
static CUSTOM: std::sync::RwLock<Vec<&'static ResourceType>> = std::sync::RwLock::new(Vec::new());

/// Moves whenever [`set_custom`] changes the set, so views derived from it
/// (OpenAPI documents of custom group-versions) know when to be rebuilt.
static CUSTOM_GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Replaces the served custom resources.
pub fn set_custom(resources: Vec<&'static ResourceType>) {
    let changed = match CUSTOM.write() {
        Ok(mut g) => std::mem::replace(&mut *g, resources) != *g,
        Err(poisoned) => {
            let mut g = poisoned.into_inner();
            std::mem::replace(&mut *g, resources) != *g
        }
    };
    if changed {
        CUSTOM_GENERATION.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// See [`CUSTOM_GENERATION`].
pub fn custom_generation() -> u64 {
    CUSTOM_GENERATION.load(std::sync::atomic::Ordering::SeqCst)
}

/// The served custom resources, in the order [`set_custom`] gave them.
pub fn custom() -> Vec<&'static ResourceType> {
    match CUSTOM.read() {
        Ok(g) => g.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}

/// Every served resource: built-in, then custom.
pub fn all() -> impl Iterator<Item = &'static ResourceType> {
    RESOURCES.iter().chain(custom())
}

/// Groups in discovery order. Within a group the preferred version comes first
/// (v2 before v1 for autoscaling, as upstream).
pub fn groups() -> Vec<Group> {
    groups_of(all())
}

/// The groups of the built-in resources only.
pub fn builtin_groups() -> Vec<Group> {
    groups_of(RESOURCES.iter())
}

fn groups_of(resources: impl Iterator<Item = &'static ResourceType>) -> Vec<Group> {
    let mut out: Vec<Group> = Vec::new();
    for r in resources {
        match out.iter_mut().find(|g| g.name == r.group) {
            Some(g) => {
                if !g.versions.contains(&r.version) {
                    g.versions.push(r.version);
                }
            }
            None => out.push(Group {
                name: r.group,
                versions: vec![r.version],
            }),
        }
    }
    out
}

/// Resources of one group-version.
pub fn resources_in<'a>(
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'static ResourceType> + 'a {
    all().filter(move |r| r.group == group && r.version == version)
}

/// The resource served at `group/version/plural`.
pub fn lookup(group: &str, version: &str, plural: &str) -> Option<&'static ResourceType> {
    let hit = |r: &&ResourceType| r.group == group && r.version == version && r.plural == plural;
    RESOURCES
        .iter()
        .find(hit)
        .or_else(|| custom().into_iter().find(hit))
}

/// The resource of a kind at a group-version (for bodies naming `apiVersion`/`kind`).
pub fn lookup_kind(group: &str, version: &str, kind: &str) -> Option<&'static ResourceType> {
    let hit = |r: &&ResourceType| r.group == group && r.version == version && r.kind == kind;
    RESOURCES
        .iter()
        .find(hit)
        .or_else(|| custom().into_iter().find(hit))
}

/// Splits an `apiVersion` into group and version (`v1` → ("", "v1")).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// Upstream's deprecation warning for a served version that upstream has since
/// removed (sent as a `Warning` header on every request to it, as upstream's
/// handlers do for deprecated versions).
pub fn deprecation_warning(rt: &ResourceType) -> Option<String> {
    if let Some(cr) = rt.custom {
        return cr.deprecation_warning.clone();
    }
    // (group, version, kind, deprecated in, removed in, replacement group/version)
    const DEPRECATED: &[(&str, &str, &str, &str, &str, &str)] = &[
        (
            "networking.k8s.io",
            "v1beta1",
            "Ingress",
            "1.19",
            "1.22",
            "networking.k8s.io/v1",
        ),
        (
            "networking.k8s.io",
            "v1beta1",
            "IngressClass",
            "1.19",
            "1.22",
            "networking.k8s.io/v1",
        ),
        (
            "autoscaling",
            "v2beta2",
            "HorizontalPodAutoscaler",
            "1.23",
            "1.26",
            "autoscaling/v2",
        ),
    ];
    DEPRECATED
        .iter()
        .find(|(g, v, k, ..)| (*g, *v, *k) == (rt.group, rt.version, rt.kind))
        .map(|(g, v, k, dep, rem, to)| {
            format!("{g}/{v} {k} is deprecated in v{dep}+, unavailable in v{rem}+; use {to} {k}")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_resource_roundtrips_its_own_kind() {
        for r in RESOURCES {
            let obj = serde_json::json!({
                "apiVersion": r.api_version(),
                "kind": r.kind,
                "metadata": {"name": "x", "unknownField": 1},
            });
            let out = (r.roundtrip)(obj).unwrap_or_else(|e| panic!("{}: {e}", r.kind));
            assert_eq!(out["metadata"]["name"], "x", "{}", r.kind);
            assert!(
                out["metadata"].get("unknownField").is_none(),
                "{} kept an unknown field",
                r.kind
            );
        }
    }

    #[test]
    fn short_names_are_unique_per_resource() {
        let mut seen = std::collections::HashMap::new();
        for r in RESOURCES {
            for s in r.short_names {
                // events and events.events.k8s.io share `ev`, as upstream.
                if let Some(prev) = seen.insert(*s, r.plural) {
                    assert_eq!(prev, r.plural, "short name {s} reused");
                }
            }
        }
    }

    /// The per-kind facts as the tables that were keyed on kind names had them.
    #[test]
    fn per_kind_facts() {
        let generation = [
            ("apps", "Deployment"),
            ("apps", "ReplicaSet"),
            ("apps", "StatefulSet"),
            ("apps", "DaemonSet"),
            ("", "ReplicationController"),
            ("batch", "Job"),
            ("batch", "CronJob"),
            ("autoscaling", "HorizontalPodAutoscaler"),
            ("policy", "PodDisruptionBudget"),
            ("networking.k8s.io", "NetworkPolicy"),
            ("networking.k8s.io", "Ingress"),
            ("apiextensions.k8s.io", "CustomResourceDefinition"),
            ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
        ];
        let status_only = [
            ("", "Pod"),
            ("", "Service"),
            ("", "Namespace"),
            ("", "Node"),
            ("", "PersistentVolume"),
            ("", "PersistentVolumeClaim"),
            ("", "ResourceQuota"),
            ("apiregistration.k8s.io", "APIService"),
            ("storage.k8s.io", "VolumeAttachment"),
        ];
        for r in RESOURCES {
            let gk = (r.group, r.kind);
            assert_eq!(r.tracks_generation, generation.contains(&gk), "{gk:?}");
            assert_eq!(
                r.keeps_status,
                generation.contains(&gk) || status_only.contains(&gk),
                "{gk:?}"
            );
            let rule = match gk {
                ("", "Namespace") => NameRule::Label,
                ("", "Service") => NameRule::Dns1035Label,
                (
                    "rbac.authorization.k8s.io",
                    "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding",
                ) => NameRule::PathSegment,
                _ => NameRule::Subdomain,
            };
            assert_eq!(r.name_rule, rule, "{gk:?}");
            assert_eq!(
                r.kube_finalizers,
                r.group != "apiextensions.k8s.io",
                "{gk:?}"
            );
            // Every version of a kind shares its facts.
            for other in RESOURCES.iter().filter(|o| (o.group, o.kind) == gk) {
                assert_eq!(other.strategy, r.strategy, "{gk:?}");
                assert_eq!(other.validate.is_some(), r.validate.is_some(), "{gk:?}");
            }
        }
    }

    #[test]
    fn autoscaling_prefers_v2() {
        let g = groups()
            .into_iter()
            .find(|g| g.name == "autoscaling")
            .unwrap();
        // v2beta2 is last, as upstream 1.25 listed it (v2, v1, v2beta2).
        assert_eq!(g.versions, vec!["v2", "v1", "v2beta2"]);
    }

    #[test]
    fn lookups() {
        assert_eq!(
            lookup("apps", "v1", "deployments").unwrap().kind,
            "Deployment"
        );
        assert_eq!(lookup_kind("", "v1", "Pod").unwrap().plural, "pods");
        assert_eq!(split_api_version("apps/v1"), ("apps", "v1"));
        assert_eq!(split_api_version("v1"), ("", "v1"));
    }

    #[test]
    fn deprecated_versions_warn_as_upstream() {
        let cases = [
            (
                ("networking.k8s.io", "v1beta1", "ingresses"),
                Some(
                    "networking.k8s.io/v1beta1 Ingress is deprecated in v1.19+, unavailable in v1.22+; use networking.k8s.io/v1 Ingress",
                ),
            ),
            (
                ("networking.k8s.io", "v1beta1", "ingressclasses"),
                Some(
                    "networking.k8s.io/v1beta1 IngressClass is deprecated in v1.19+, unavailable in v1.22+; use networking.k8s.io/v1 IngressClass",
                ),
            ),
            (
                ("autoscaling", "v2beta2", "horizontalpodautoscalers"),
                Some(
                    "autoscaling/v2beta2 HorizontalPodAutoscaler is deprecated in v1.23+, unavailable in v1.26+; use autoscaling/v2 HorizontalPodAutoscaler",
                ),
            ),
            (("networking.k8s.io", "v1", "ingresses"), None),
            (("", "v1", "pods"), None),
        ];
        for ((g, v, plural), want) in cases {
            let rt = lookup(g, v, plural).expect(plural);
            assert_eq!(deprecation_warning(rt).as_deref(), want, "{g}/{v} {plural}");
        }
    }
}
