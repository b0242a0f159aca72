//! Every error leaves the server as a meta/v1 `Status` with code, reason, message
//! and details, worded as upstream's apimachinery errors.

use serde_json::{Value, json};

use berth_api::registry::ResourceType;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

pub type ApiResult<T> = Result<T, ApiError>;

fn details(rt: Option<&ResourceType>, name: &str) -> Value {
    let mut d = json!({ "name": name });
    if let Some(rt) = rt {
        if !rt.group.is_empty() {
            d["group"] = json!(rt.group);
        }
        d["kind"] = json!(rt.plural);
    }
    d
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn not_found(rt: &ResourceType, name: &str) -> Self {
        ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("{} \"{}\" not found", rt.group_resource(), name),
            details: Some(details(Some(rt), name)),
        }
    }

    /// A 404 for a URL that names no resource at all.
    pub fn path_not_found() -> Self {
        ApiError {
            code: 404,
            reason: "NotFound",
            message: "the server could not find the requested resource".into(),
            details: Some(json!({})),
        }
    }

    pub fn already_exists(rt: &ResourceType, name: &str) -> Self {
        ApiError {
            code: 409,
            reason: "AlreadyExists",
            message: format!("{} \"{}\" already exists", rt.group_resource(), name),
            details: Some(details(Some(rt), name)),
        }
    }

    pub fn conflict(rt: &ResourceType, name: &str) -> Self {
        ApiError {
            code: 409,
            reason: "Conflict",
            message: format!(
                "Operation cannot be fulfilled on {} \"{}\": the object has been modified; please apply your changes to the latest version and try again",
                rt.group_resource(),
                name
            ),
            details: Some(details(Some(rt), name)),
        }
    }

    pub fn conflict_msg(rt: &ResourceType, name: &str, why: &str) -> Self {
        ApiError {
            code: 409,
            reason: "Conflict",
            message: format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                rt.group_resource(),
                name,
                why
            ),
            details: Some(details(Some(rt), name)),
        }
    }

    pub fn invalid(rt: &ResourceType, name: &str, message: String, causes: Vec<Value>) -> Self {
        let mut d = details(Some(rt), name);
        d["kind"] = json!(rt.kind);
        d["causes"] = Value::Array(causes);
        ApiError {
            code: 422,
            reason: "Invalid",
            message,
            details: Some(d),
        }
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    pub fn unsupported_media_type(ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json (got {ct})"
            ),
        )
    }

    pub fn not_acceptable() -> Self {
        Self::new(
            406,
            "NotAcceptable",
            "only the following media types are accepted: application/json, application/yaml, application/json;as=Table;v=v1;g=meta.k8s.io",
        )
    }

    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// Upstream's timeout filter's answer to a request past `--request-timeout`.
    pub fn request_timeout() -> Self {
        Self::new(
            504,
            "Timeout",
            "Timeout: request did not complete within requested timeout - context deadline exceeded",
        )
    }

    pub fn too_large() -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            "Request entity too large: limit is 3145728",
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }

    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl From<berth_store::StoreError> for ApiError {
    fn from(e: berth_store::StoreError) -> Self {
        use berth_store::StoreError as E;
        match e {
            E::Compacted {
                requested,
                compacted,
            } => ApiError::gone(format!(
                "The resourceVersion for the provided watch is too old. (requested {requested}, compacted {compacted})"
            )),
            E::FutureRevision(r) => ApiError::timeout(format!("Too large resource version: {r}")),
            other => ApiError::internal(other.to_string()),
        }
    }
}
