//! What one admission request looks like to the webhooks (upstream's
//! `admission.Attributes`), and the callbacks into the API server that the
//! dispatchers need ([`Hooks`]).

use std::collections::BTreeMap;
use std::fmt;

use async_trait::async_trait;
use berth_api::user::UserInfo;
use serde_json::Value;

/// Upstream's `admission.Operation`, spelled as the webhook rules spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
}

impl Operation {
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`: the rule and the
    /// AdmissionRequest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A resource at one version (`schema.GroupVersionResource`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct GroupVersionResource {
    pub group: String,
    pub version: String,
    pub resource: String,
}

impl GroupVersionResource {
    pub fn new(group: &str, version: &str, resource: &str) -> Self {
        GroupVersionResource {
            group: group.to_string(),
            version: version.to_string(),
            resource: resource.to_string(),
        }
    }

    /// `<resource>.<group>` (or just `<resource>` in the core group), as
    /// upstream's `GroupResource.String()` in error messages.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

impl fmt::Display for GroupVersionResource {
    /// Go's `GroupVersionResource.String()`: `apps/v1, Resource=deployments`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}/{}, Resource={}",
            self.group, self.version, self.resource
        )
    }
}

/// A kind at one version (`schema.GroupVersionKind`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct GroupVersionKind {
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl GroupVersionKind {
    pub fn new(group: &str, version: &str, kind: &str) -> Self {
        GroupVersionKind {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.to_string(),
        }
    }

    /// The `apiVersion` an object of this kind carries (`apps/v1`, `v1`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

impl fmt::Display for GroupVersionKind {
    /// Go's `GroupVersionKind.String()`: `apps/v1, Kind=Deployment`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// One request as the webhooks see it. Empty strings mean "none", as
/// upstream: `subresource` for the main resource, `namespace` for
/// cluster-scoped objects.
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    pub operation: Operation,
    /// The kind of the request's object (`requestKind` in the review).
    pub kind: &'a GroupVersionKind,
    /// The resource the request addressed (`requestResource`).
    pub resource: &'a GroupVersionResource,
    pub subresource: &'a str,
    /// The object's namespace. For a Namespace itself it may be left empty:
    /// its own name is used except on create, as upstream's request info.
    pub namespace: &'a str,
    pub name: &'a str,
    pub user: &'a UserInfo,
    /// The new object (create, update, connect options). Ignored by
    /// `mutate`, which takes the object it changes separately.
    pub object: Option<&'a Value>,
    /// The stored object, for updates and deletes.
    pub old_object: Option<&'a Value>,
    pub dry_run: bool,
    /// CreateOptions, UpdateOptions or DeleteOptions as the client sent
    /// them; `kind` and `apiVersion` (`meta.k8s.io/v1`) are filled in when
    /// missing, and an empty one is made when `None`.
    pub options: Option<&'a Value>,
}

impl Attributes<'_> {
    /// The namespace as upstream's attributes carry it: a request to
    /// `/api/v1/namespaces/<name>` is "in" that namespace (its request info
    /// says so), while a create posts to `/api/v1/namespaces` and has none.
    pub(crate) fn effective_namespace(&self) -> &str {
        if self.namespace.is_empty()
            && self.is_namespace_resource()
            && self.operation != Operation::Create
        {
            self.name
        } else {
            self.namespace
        }
    }

    pub(crate) fn is_namespace_resource(&self) -> bool {
        self.resource.group.is_empty() && self.resource.resource == "namespaces"
    }
}

/// What a match condition is evaluated against: one condition of one
/// webhook and the AdmissionRequest that would be sent (its `object`,
/// `oldObject`, `userInfo`, … are CEL's `object`, `oldObject` and `request`).
#[derive(Debug, Clone, Copy)]
pub struct MatchConditionInput<'a> {
    pub configuration: &'a str,
    pub webhook: &'a str,
    pub name: &'a str,
    pub expression: &'a str,
    /// The `request` field of the AdmissionReview (admission.k8s.io/v1).
    pub request: &'a Value,
}

/// The API server's side of the dispatch: what the webhooks plugin reads from
/// informers and its scheme upstream.
#[async_trait]
pub trait Hooks: Send + Sync {
    /// The labels of namespace `name`, for `namespaceSelector`; `Ok(None)`
    /// when it does not exist (the request then fails with 404, as
    /// upstream). Upstream reads its namespace informer and falls back to a
    /// live read on a miss.
    async fn namespace_labels(
        &self,
        name: &str,
    ) -> Result<Option<BTreeMap<String, String>>, String>;

    /// `matchPolicy: Equivalent`: the other resources (and their kinds) that
    /// serve the same objects as `resource`/`subresource`, e.g.
    /// `apps/v1beta1 deployments` for `apps/v1 deployments`, in upstream's
    /// preference order. The request's own resource may be included; it is
    /// skipped.
    fn equivalent_resources(
        &self,
        _resource: &GroupVersionResource,
        _subresource: &str,
    ) -> Vec<(GroupVersionResource, GroupVersionKind)> {
        Vec::new()
    }

    /// Converts `obj` to `to` (an equivalent kind chosen above, or back to
    /// the request's kind after a patch). The default only accepts objects
    /// already at `to`'s version.
    fn convert(&self, obj: &Value, to: &GroupVersionKind) -> Result<Value, String> {
        let api_version = obj.get("apiVersion").and_then(Value::as_str);
        if api_version.is_none_or(|v| v == to.api_version()) {
            Ok(obj.clone())
        } else {
            Err(format!("converting to {to} is not supported"))
        }
    }

    /// Evaluates one match condition (a CEL expression). Errors follow the
    /// webhook's failurePolicy, as upstream's matcher.
    fn evaluate_match_condition(&self, _input: &MatchConditionInput<'_>) -> Result<bool, String> {
        Err("match conditions are not supported by this API server".to_string())
    }

    /// Runs on an object a mutating webhook patched, at the webhook's
    /// version: upstream decodes the patched JSON into the typed object
    /// (dropping unknown fields, refusing wrong types) and applies defaults.
    /// An error fails the request with 500.
    fn after_patch(&self, _kind: &GroupVersionKind, _obj: &mut Value) -> Result<(), String> {
        Ok(())
    }
}
