//! audit.k8s.io/v1 `Event` as upstream serialises it (field order and
//! omissions of its Go struct, microsecond RFC 3339 timestamps), and the last
//! step of an event, done by the log writer off the request path: the request
//! and response bodies decoded into `objectRef`, `requestObject`,
//! `responseStatus` and `responseObject` as upstream's `LogRequestObject`,
//! `LogRequestPatch` and `LogResponseObject` fill them.

use std::collections::BTreeMap;

use berth_api::user::UserInfo;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::policy::{Level, Stage};

fn is_empty(s: &str) -> bool {
    s.is_empty()
}

/// authentication/v1 `UserInfo` (every field omitted when empty).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct User {
    #[serde(skip_serializing_if = "is_empty")]
    pub username: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub uid: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl From<&UserInfo> for User {
    fn from(u: &UserInfo) -> Self {
        User {
            username: u.name.clone(),
            uid: u.uid.clone(),
            groups: u.groups.clone(),
            extra: u.extra.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(skip_serializing_if = "is_empty")]
    pub resource: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub uid: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub api_group: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub api_version: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub resource_version: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub subresource: String,
}

/// An empty `metadata: {}` (meta/v1 ListMeta, never omitted by Go).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EmptyMeta {}

/// The meta/v1 `Status` fields upstream copies into `responseStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ResponseStatus {
    pub metadata: EmptyMeta,
    #[serde(skip_serializing_if = "is_empty")]
    pub status: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub message: String,
    #[serde(skip_serializing_if = "is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    #[serde(skip_serializing_if = "is_zero")]
    pub code: i32,
}

fn is_zero(c: &i32) -> bool {
    *c == 0
}

impl ResponseStatus {
    /// Only the HTTP code (what the response writer records).
    pub fn code(code: u16) -> Self {
        ResponseStatus {
            code: i32::from(code),
            ..Default::default()
        }
    }

    /// The bounded fields of a meta/v1 Status body.
    pub fn from_status(v: &Value) -> Self {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        ResponseStatus {
            metadata: EmptyMeta {},
            status: s("status"),
            message: s("message"),
            reason: s("reason"),
            details: v.get("details").filter(|d| !d.is_null()).cloned(),
            code: v
                .get("code")
                .and_then(Value::as_i64)
                .and_then(|c| i32::try_from(c).ok())
                .unwrap_or(0),
        }
    }
}

/// metav1.MicroTime's text: RFC 3339 with microseconds, in UTC.
pub fn micro_time(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

fn ser_micro_time<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&micro_time(t))
}

pub const KIND: &str = "Event";
pub const API_VERSION: &str = "audit.k8s.io/v1";

/// One audit event (audit.k8s.io/v1), fields in upstream's order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Always [`KIND`].
    pub kind: &'static str,
    /// Always [`API_VERSION`].
    pub api_version: &'static str,
    pub level: Level,
    #[serde(rename = "auditID")]
    pub audit_id: String,
    pub stage: Stage,
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    pub verb: String,
    pub user: User,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<User>,
    #[serde(rename = "sourceIPs", skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    #[serde(skip_serializing_if = "is_empty")]
    pub user_agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_status: Option<ResponseStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_object: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_object: Option<Value>,
    #[serde(serialize_with = "ser_micro_time")]
    pub request_received_timestamp: DateTime<Utc>,
    #[serde(serialize_with = "ser_micro_time")]
    pub stage_timestamp: DateTime<Utc>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// An event on its way to the log, with the bodies still undecoded.
#[derive(Debug)]
pub struct Pending {
    pub event: Event,
    /// The request body and its Content-Type.
    pub request_body: Option<(Bytes, String)>,
    /// The whole response body and its Content-Type.
    pub response_body: Option<(Bytes, String)>,
    pub omit_managed_fields: bool,
}

/// Drops `metadata.managedFields` of an object, a list's items or a Table's
/// rows (upstream's `copyWithoutManagedFields`).
pub fn strip_managed_fields(v: &mut Value) {
    fn one(v: &mut Value) {
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
    }
    one(v);
    if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
        items.iter_mut().for_each(one);
    }
    if let Some(rows) = v.get_mut("rows").and_then(Value::as_array_mut) {
        for row in rows {
            if let Some(obj) = row.get_mut("object") {
                one(obj);
            }
        }
    }
}

fn decode(body: &(Bytes, String)) -> Option<Value> {
    let (bytes, content_type) = body;
    if bytes.is_empty() {
        return None;
    }
    crate::decode::parse(content_type, bytes).ok()
}

impl Pending {
    /// The event as written.
    pub fn complete(self) -> Event {
        let mut ev = self.event;
        if let Some(body) = &self.request_body {
            // A patch is logged as sent (LogRequestPatch); other bodies are
            // objects whose metadata completes objectRef (LogRequestObject).
            let patch = ev.verb == "patch";
            if (ev.level >= Level::Request || !patch)
                && let Some(mut v) = decode(body)
            {
                if !patch
                    && let Some(r) = ev.object_ref.as_mut()
                    && let Some(meta) = v.get("metadata")
                {
                    let field = |k: &str| meta.get(k).and_then(Value::as_str).unwrap_or("");
                    for (slot, key) in [
                        (&mut r.namespace, "namespace"),
                        (&mut r.name, "name"),
                        (&mut r.uid, "uid"),
                        (&mut r.resource_version, "resourceVersion"),
                    ] {
                        if slot.is_empty() {
                            *slot = field(key).to_string();
                        }
                    }
                }
                if ev.level >= Level::Request {
                    if self.omit_managed_fields && !patch {
                        strip_managed_fields(&mut v);
                    }
                    ev.request_object = Some(v);
                }
            }
        }
        if let Some(body) = &self.response_body
            && let Some(mut v) = decode(body)
        {
            if v.get("kind").and_then(Value::as_str) == Some("Status") {
                ev.response_status = Some(ResponseStatus::from_status(&v));
            }
            if ev.level >= Level::RequestResponse {
                if self.omit_managed_fields {
                    strip_managed_fields(&mut v);
                }
                ev.response_object = Some(v);
            }
        }
        ev
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s)
            .map(|t| t.with_timezone(&Utc))
            .expect("time")
    }

    fn event(level: Level, verb: &str) -> Event {
        Event {
            kind: KIND,
            api_version: API_VERSION,
            level,
            audit_id: "5f2b7a0c-3d8e-4a51-9b0e-0c2d4e6f8a1b".into(),
            stage: Stage::ResponseComplete,
            request_uri: "/api/v1/namespaces/default/secrets?limit=500".into(),
            verb: verb.into(),
            user: (&UserInfo::admin()).into(),
            impersonated_user: None,
            source_ips: vec!["127.0.0.1".into()],
            user_agent: "kubectl/v1.33.0 (linux/amd64) kubernetes/abcdef0".into(),
            object_ref: Some(ObjectReference {
                resource: "secrets".into(),
                namespace: "default".into(),
                api_version: "v1".into(),
                ..Default::default()
            }),
            response_status: Some(ResponseStatus::code(200)),
            request_object: None,
            response_object: None,
            request_received_timestamp: at("2026-12-02T19:04:40.123456789Z"),
            stage_timestamp: at("2026-12-02T19:04:40.2Z"),
            annotations: BTreeMap::from([
                ("authorization.k8s.io/decision".into(), "allow".into()),
                ("authorization.k8s.io/reason".into(), "".into()),
            ]),
        }
    }

    #[test]
    fn serialises_as_upstream() {
        // Upstream's field order and omissions; microseconds, truncated.
        let line = serde_json::to_string(&event(Level::Metadata, "list")).expect("json");
        assert_eq!(
            line,
            concat!(
                r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","#,
                r#""auditID":"5f2b7a0c-3d8e-4a51-9b0e-0c2d4e6f8a1b","stage":"ResponseComplete","#,
                r#""requestURI":"/api/v1/namespaces/default/secrets?limit=500","verb":"list","#,
                r#""user":{"username":"system:admin","groups":["system:masters","system:authenticated"]},"#,
                r#""sourceIPs":["127.0.0.1"],"userAgent":"kubectl/v1.33.0 (linux/amd64) kubernetes/abcdef0","#,
                r#""objectRef":{"resource":"secrets","namespace":"default","apiVersion":"v1"},"#,
                r#""responseStatus":{"metadata":{},"code":200},"#,
                r#""requestReceivedTimestamp":"2026-12-02T19:04:40.123456Z","#,
                r#""stageTimestamp":"2026-12-02T19:04:40.200000Z","#,
                r#""annotations":{"authorization.k8s.io/decision":"allow","authorization.k8s.io/reason":""}}"#
            )
        );
    }

    #[test]
    fn failed_authentication_has_an_empty_user() {
        let mut ev = event(Level::Metadata, "get");
        ev.user = User::default();
        ev.annotations.clear();
        ev.object_ref = None;
        let v = serde_json::to_value(&ev).expect("json");
        assert_eq!(v["user"], json!({}));
        assert!(v.get("annotations").is_none() && v.get("objectRef").is_none());
    }

    fn json_body(v: Value) -> Option<(Bytes, String)> {
        Some((
            Bytes::from(serde_json::to_vec(&v).expect("json")),
            "application/json".into(),
        ))
    }

    fn secret() -> Value {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "s1", "namespace": "default", "uid": "u-1",
                            "resourceVersion": "7",
                            "managedFields": [{"manager": "kubectl"}]},
               "data": {"k": "dg=="}})
    }

    /// What each level keeps of the same create (table: level → requestObject?,
    /// responseObject?); objectRef gains the body's name at every level.
    #[test]
    fn bodies_by_level() {
        let cases = [
            (Level::Metadata, false, false),
            (Level::Request, true, false),
            (Level::RequestResponse, true, true),
        ];
        for (level, want_request, want_response) in cases {
            let mut ev = event(level, "create");
            ev.request_uri = "/api/v1/namespaces/default/secrets".into();
            let p = Pending {
                event: ev,
                request_body: json_body(secret()),
                response_body: json_body(secret()),
                omit_managed_fields: false,
            };
            let out = p.complete();
            let r = out.object_ref.as_ref().expect("objectRef");
            assert_eq!(
                (r.name.as_str(), r.uid.as_str(), r.resource_version.as_str()),
                ("s1", "u-1", "7"),
                "{level:?}"
            );
            assert_eq!(out.request_object.is_some(), want_request, "{level:?}");
            assert_eq!(out.response_object.is_some(), want_response, "{level:?}");
            assert_eq!(out.response_status, Some(ResponseStatus::code(200)));
        }
    }

    #[test]
    fn a_patch_is_logged_as_sent() {
        let patch = json!({"metadata": {"name": "other", "labels": {"a": "b"}}});
        let mut ev = event(Level::Request, "patch");
        ev.object_ref.as_mut().expect("ref").name = "s1".into();
        let out = Pending {
            event: ev,
            request_body: Some((
                Bytes::from(patch.to_string()),
                "application/merge-patch+json".into(),
            )),
            response_body: None,
            omit_managed_fields: true,
        }
        .complete();
        assert_eq!(out.request_object, Some(patch));
        assert_eq!(out.object_ref.expect("ref").name, "s1");
    }

    #[test]
    fn failures_carry_the_status() {
        let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "reason": "Forbidden", "code": 403,
            "message": "secrets is forbidden: User \"bob\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\"",
            "details": {"kind": "secrets"}});
        let mut ev = event(Level::Metadata, "list");
        ev.response_status = Some(ResponseStatus::code(403));
        let out = Pending {
            event: ev,
            request_body: None,
            response_body: json_body(status),
            omit_managed_fields: false,
        }
        .complete();
        let v = serde_json::to_value(out.response_status).expect("json");
        assert_eq!(
            v,
            json!({"metadata": {}, "status": "Failure",
                "message": "secrets is forbidden: User \"bob\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\"",
                "reason": "Forbidden", "details": {"kind": "secrets"}, "code": 403})
        );
        assert!(out.response_object.is_none());
    }

    #[test]
    fn omit_managed_fields_covers_objects_lists_and_tables() {
        let mf = json!([{"manager": "m"}]);
        let cases = [
            json!({"metadata": {"name": "a", "managedFields": mf}}),
            json!({"kind": "SecretList", "items": [{"metadata": {"name": "a", "managedFields": mf}}]}),
            json!({"kind": "Table", "rows": [{"cells": [], "object": {"metadata": {"name": "a", "managedFields": mf}}}]}),
        ];
        for mut v in cases {
            strip_managed_fields(&mut v);
            assert!(!v.to_string().contains("managedFields"), "{v}");
            assert!(v.to_string().contains("\"name\":\"a\""), "{v}");
        }
    }

    #[test]
    fn undecodable_bodies_leave_the_event_as_it_was() {
        let ev = event(Level::RequestResponse, "create");
        let out = Pending {
            event: ev.clone(),
            request_body: Some((Bytes::from_static(b"{not json"), "application/json".into())),
            response_body: Some((
                Bytes::from_static(b"Too many requests, please try again later.\n"),
                "text/plain; charset=utf-8".into(),
            )),
            omit_managed_fields: false,
        }
        .complete();
        assert_eq!(out, ev);
    }
}
