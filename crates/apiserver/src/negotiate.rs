//! Content negotiation, as upstream's `negotiation.NegotiateMediaTypeOptions`: the
//! `Accept` clauses in goautoneg's order (q-value, then specific before wildcard),
//! each tried against the server's media types in their order (JSON, YAML,
//! protobuf). The chosen one fixes the encoding (JSON or protobuf) and the shape:
//! plain objects, a server-side `Table` (what `kubectl get` prints; JSON and YAML
//! only, as upstream) or `PartialObjectMetadata`.

use berth_api::printers;
use berth_api::protobuf;
use berth_api::registry::ResourceType;
use serde_json::{Value, json};

use crate::status::{ApiError, ApiResult};

pub const TABLE_CONTENT_TYPE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Object,
    Table { version: &'static str },
    Metadata { version: &'static str },
}

/// How the response body is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    /// `application/vnd.kubernetes.protobuf` (`k8s\0` + `runtime.Unknown`).
    Protobuf,
}

/// The outcome of negotiation: the body's encoding and shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Output {
    pub format: Format,
    pub shape: Shape,
}

impl Output {
    pub const JSON: Output = Output {
        format: Format::Json,
        shape: Shape::Object,
    };
}

/// One clause of `Accept`, parsed as goautoneg does.
#[derive(Debug)]
struct Clause<'a> {
    ty: &'a str,
    sub: &'a str,
    q: f64,
    params: Vec<(&'a str, &'a str)>,
}

/// goautoneg's ordering: `a` sorts before `b`. (Not a strict order: upstream runs it
/// through Go's `sort.Sort`, which is an insertion sort for headers this short.)
fn before(a: &Clause<'_>, b: &Clause<'_>) -> bool {
    a.q > b.q || (a.ty != "*" && b.ty == "*") || (a.sub != "*" && b.sub == "*")
}

/// Splits `Accept` into clauses: `type/subtype` (or a bare `*`), `q` (default 1, 0
/// when unparsable), other parameters kept; malformed clauses are skipped.
fn parse_accept(header: &str) -> Vec<Clause<'_>> {
    let mut out: Vec<Clause<'_>> = Vec::new();
    for part in header.split(',') {
        let part = part.trim_matches(' ');
        let mut pieces = part.split(';');
        let media = pieces.next().unwrap_or("");
        let (ty, sub) = match media.split_once('/') {
            None if media.trim_matches(' ') == "*" => ("*", "*"),
            None => continue,
            Some((_, sub)) if sub.contains('/') => continue,
            Some((ty, sub)) => (ty.trim_matches(' '), sub.trim_matches(' ')),
        };
        let mut clause = Clause {
            ty,
            sub,
            q: 1.0,
            params: Vec::new(),
        };
        for p in pieces {
            let Some((k, v)) = p.split_once('=') else {
                continue;
            };
            if v.contains('=') {
                continue;
            }
            let k = k.trim_matches(' ');
            if k == "q" {
                clause.q = v.parse::<f32>().map(f64::from).unwrap_or(0.0);
            } else {
                clause.params.push((k, v.trim_matches(' ')));
            }
        }
        out.push(clause);
    }
    // Go's insertion sort (what sort.Sort does below 13 elements), same comparator.
    for i in 1..out.len() {
        let mut j = i;
        while j > 0 && before(&out[j], &out[j - 1]) {
            out.swap(j, j - 1);
            j -= 1;
        }
    }
    out
}

/// The server's media types, in upstream's order.
const JSON: (&str, &str) = ("application", "json");
const YAML: (&str, &str) = ("application", "yaml");
const PROTOBUF: (&str, &str) = ("application", "vnd.kubernetes.protobuf");

/// Upstream's `acceptMediaTypeOptions` + the resource endpoint's
/// `AllowsMediaTypeTransform`: the output for `media` under `params`, if allowed.
/// `transforms`: whether Table/PartialObjectMetadata conversions are allowed (resource
/// endpoints) or not (errors: upstream's DefaultEndpointRestrictions).
fn accept_options(
    media: (&str, &str),
    params: &[(&str, &str)],
    transforms: bool,
) -> Option<Output> {
    let (mut as_, mut g, mut v) = (None, None, None);
    for &(k, val) in params {
        match k {
            "as" => as_ = Some(val),
            "g" => g = Some(val),
            "v" => v = Some(val),
            // YAML has no stream serializer upstream; only `watch` is a known schema.
            "stream" if !val.is_empty() && (media == YAML || val != "watch") => return None,
            "sv" if !val.is_empty() && val != "v1" => return None,
            _ => {}
        }
    }
    let format = if media == PROTOBUF {
        Format::Protobuf
    } else {
        Format::Json
    };
    if as_.is_none() && g.is_none() && v.is_none() {
        return Some(Output {
            format,
            shape: Shape::Object,
        });
    }
    if !transforms || g != Some("meta.k8s.io") {
        return None;
    }
    let version = match v {
        Some("v1") => "v1",
        Some("v1beta1") => "v1beta1",
        _ => return None,
    };
    let shape = match as_ {
        // Upstream serves Tables only as JSON or YAML.
        Some("Table") if format == Format::Json => Shape::Table { version },
        // meta/v1beta1's PartialObjectMetadataList numbers its fields differently
        // from v1's; the field table has only v1's.
        Some("PartialObjectMetadata" | "PartialObjectMetadataList")
            if format == Format::Json || version == "v1" =>
        {
            Shape::Metadata { version }
        }
        _ => return None,
    };
    Some(Output { format, shape })
}

fn negotiate_with(accept: &str, protobuf_ok: bool, transforms: bool) -> Option<Output> {
    if accept.is_empty() {
        return Some(Output::JSON);
    }
    let mut server = vec![JSON, YAML];
    if protobuf_ok {
        server.push(PROTOBUF);
    }
    for clause in parse_accept(accept) {
        for &media in &server {
            let matches = (clause.ty == media.0 && (clause.sub == media.1 || clause.sub == "*"))
                || (clause.ty == "*" && clause.sub == "*");
            if matches && let Some(out) = accept_options(media, &clause.params, transforms) {
                return Some(out);
            }
        }
    }
    None
}

/// Negotiates a resource response. `protobuf_ok`: the resource's kind has a protobuf
/// message (every built-in kind does).
pub fn negotiate(accept: &str, protobuf_ok: bool) -> ApiResult<Output> {
    negotiate_with(accept, protobuf_ok, true).ok_or_else(|| {
        // Upstream's NewNotAcceptableError lists the serializers' media types.
        let mut types = vec!["application/json", "application/yaml"];
        if protobuf_ok {
            types.push(protobuf::CONTENT_TYPE);
        }
        ApiError::new(
            406,
            "NotAcceptable",
            format!(
                "only the following media types are accepted: {}",
                types.join(", ")
            ),
        )
    })
}

/// The encoding of an error's Status: negotiated without conversions (upstream's
/// `ErrorNegotiated`); JSON when nothing matches.
pub fn error_format(accept: &str) -> Format {
    negotiate_with(accept, true, false).map_or(Format::Json, |o| o.format)
}

/// The shape a JSON client asked for (kept for callers that only produce JSON).
pub fn shape(accept: &str) -> ApiResult<Shape> {
    negotiate(accept, false).map(|o| o.shape)
}

/// Whether responses for `rt` (its kind and list kind) can be written as protobuf.
pub fn protobuf_ok(rt: &ResourceType) -> bool {
    let av = rt.api_version();
    protobuf::schema::message_for_kind(&av, rt.kind).is_some()
        && (rt.is_review() || protobuf::schema::message_for_kind(&av, rt.list_kind).is_some())
}

/// How much of each object a Table row carries (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    None,
    Metadata,
    Object,
}

impl Include {
    pub fn parse(v: Option<&str>) -> ApiResult<Self> {
        match v {
            None | Some("Metadata") => Ok(Include::Metadata),
            Some("None") => Ok(Include::None),
            Some("Object") => Ok(Include::Object),
            Some(o) => Err(ApiError::bad_request(format!(
                "includeObject: Unsupported value: \"{o}\""
            ))),
        }
    }
}

fn partial_metadata(obj: &Value, version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A Table of `items`; `list_meta` becomes the Table's metadata. Custom
/// resources get their CRD's printer columns.
pub fn table(
    rt: &ResourceType,
    items: &[Value],
    list_meta: Value,
    include: Include,
    version: &str,
    with_columns: bool,
) -> Value {
    let now = chrono::Utc::now();
    let columns: Vec<Value> = match (with_columns, rt.custom) {
        (false, _) => Vec::new(),
        (true, Some(cr)) => printers::custom::columns(cr),
        (true, None) => printers::columns(rt.group, rt.kind)
            .iter()
            .map(|c| c.definition())
            .collect(),
    };
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let cells = match rt.custom {
                Some(cr) => printers::custom::cells(cr, o, now),
                None => printers::cells(rt.group, rt.kind, o, now),
            };
            let mut row = json!({ "cells": cells });
            match include {
                Include::None => {}
                Include::Metadata => row["object"] = partial_metadata(o, version),
                Include::Object => row["object"] = o.clone(),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

/// A PartialObjectMetadataList of `items`.
pub fn metadata_list(items: &[Value], list_meta: Value, version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": list_meta,
        "items": items.iter().map(|o| partial_metadata(o, version)).collect::<Vec<_>>(),
    })
}

pub fn content_type(shape: Shape) -> String {
    json_content_type(shape)
}

/// The Content-Type of a negotiated (non-watch) response.
pub fn output_content_type(out: Output) -> String {
    match out.format {
        // Upstream names the serializer's media type alone.
        Format::Protobuf => protobuf::CONTENT_TYPE.to_string(),
        Format::Json => json_content_type(out.shape),
    }
}

fn json_content_type(shape: Shape) -> String {
    match shape {
        Shape::Object => "application/json".into(),
        Shape::Table { version } => format!("application/json;as=Table;v={version};g=meta.k8s.io"),
        Shape::Metadata { version } => {
            format!("application/json;as=PartialObjectMetadata;v={version};g=meta.k8s.io")
        }
    }
}

/// Shapes one object (a get or a watch event).
pub fn shape_object(
    rt: &ResourceType,
    obj: Value,
    shape: Shape,
    include: Include,
    with_columns: bool,
) -> Value {
    match shape {
        Shape::Object => obj,
        Shape::Table { version } => {
            let meta = json!({ "resourceVersion": obj.get("metadata").and_then(|m| m.get("resourceVersion")).cloned().unwrap_or(json!("")) });
            table(
                rt,
                std::slice::from_ref(&obj),
                meta,
                include,
                version,
                with_columns,
            )
        }
        Shape::Metadata { version } => partial_metadata(&obj, version),
    }
}

/// Shapes a list response.
pub fn shape_list(rt: &ResourceType, list: Value, shape: Shape, include: Include) -> Value {
    match shape {
        Shape::Object => list,
        Shape::Table { version } => {
            let items = list["items"].as_array().cloned().unwrap_or_default();
            table(rt, &items, list["metadata"].clone(), include, version, true)
        }
        Shape::Metadata { version } => {
            let items = list["items"].as_array().cloned().unwrap_or_default();
            metadata_list(&items, list["metadata"].clone(), version)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PB: Output = Output {
        format: Format::Protobuf,
        shape: Shape::Object,
    };

    fn n(accept: &str) -> Output {
        negotiate(accept, true).unwrap_or_else(|e| panic!("{accept}: {e}"))
    }

    #[test]
    fn accept_headers() {
        let kubectl_get = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(shape(kubectl_get).unwrap(), Shape::Table { version: "v1" });
        assert_eq!(n(kubectl_get).format, Format::Json);
        assert_eq!(shape("application/json").unwrap(), Shape::Object);
        assert_eq!(shape("").unwrap(), Shape::Object);
        assert_eq!(
            shape("application/json;as=Frob;g=meta.k8s.io;v=v1")
                .unwrap_err()
                .code,
            406
        );
    }

    #[test]
    fn protobuf_is_chosen_in_accept_order() {
        // client-go with ContentType protobuf: `<protobuf>, */*`.
        assert_eq!(n("application/vnd.kubernetes.protobuf, */*"), PB);
        assert_eq!(
            n("application/vnd.kubernetes.protobuf, application/json"),
            PB
        );
        assert_eq!(n("application/vnd.kubernetes.protobuf"), PB);
        assert_eq!(
            n("application/json, application/vnd.kubernetes.protobuf"),
            Output::JSON
        );
        // Wildcards take the server's first media type: JSON.
        assert_eq!(n("*/*"), Output::JSON);
        assert_eq!(n("application/*"), Output::JSON);
        assert_eq!(n("*"), Output::JSON);
        // q-values order the clauses.
        assert_eq!(
            n("application/json;q=0.5, application/vnd.kubernetes.protobuf"),
            PB
        );
        assert_eq!(
            n("application/vnd.kubernetes.protobuf;q=0.9, application/json"),
            Output::JSON
        );
        // goautoneg puts a specific type before a wildcard even at lower q.
        assert_eq!(n("*/*, application/vnd.kubernetes.protobuf;q=0.5"), PB);
        // A resource without a protobuf message: protobuf is not on offer.
        assert_eq!(
            negotiate("application/vnd.kubernetes.protobuf, */*", false).unwrap(),
            Output::JSON
        );
        let e = negotiate("application/vnd.kubernetes.protobuf", false).unwrap_err();
        assert_eq!(e.code, 406);
        assert_eq!(
            e.message,
            "only the following media types are accepted: application/json, application/yaml"
        );
        assert_eq!(
            negotiate("text/html", true).unwrap_err().message,
            "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
        );
        // Watch streams: `stream=watch` is allowed; other schemas are not.
        assert_eq!(n("application/vnd.kubernetes.protobuf;stream=watch"), PB);
        assert_eq!(
            n("application/vnd.kubernetes.protobuf;stream=frob, application/json"),
            Output::JSON
        );
    }

    #[test]
    fn tables_are_json_only_metadata_is_both() {
        // Upstream serves Table only as JSON/YAML: a protobuf Table clause is skipped.
        assert_eq!(
            n(
                "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
            ),
            Output {
                format: Format::Json,
                shape: Shape::Table { version: "v1" }
            }
        );
        assert_eq!(
            negotiate(
                "application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io",
                true
            )
            .unwrap_err()
            .code,
            406
        );
        // client-go's metadata client.
        assert_eq!(
            n(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
            ),
            Output {
                format: Format::Protobuf,
                shape: Shape::Metadata { version: "v1" }
            }
        );
        assert_eq!(
            negotiate("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", false).unwrap(),
            Output {
                format: Format::Json,
                shape: Shape::Metadata { version: "v1" }
            }
        );
        // Conversions to other kinds or groups are refused.
        assert_eq!(
            negotiate("application/json;as=Deployment;g=apps;v=v1", true)
                .unwrap_err()
                .code,
            406
        );
    }

    #[test]
    fn errors_follow_accept_without_conversions() {
        assert_eq!(
            error_format("application/vnd.kubernetes.protobuf"),
            Format::Protobuf
        );
        assert_eq!(
            error_format("application/vnd.kubernetes.protobuf, */*"),
            Format::Protobuf
        );
        assert_eq!(error_format(""), Format::Json);
        assert_eq!(error_format("text/html"), Format::Json);
        // kubectl get's Table clauses are skipped; its plain JSON clause wins.
        assert_eq!(
            error_format("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
            Format::Json
        );
        assert_eq!(
            error_format(
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
            ),
            Format::Json
        );
    }

    #[test]
    fn content_types() {
        assert_eq!(
            output_content_type(PB),
            "application/vnd.kubernetes.protobuf"
        );
        assert_eq!(
            output_content_type(Output {
                format: Format::Protobuf,
                shape: Shape::Metadata { version: "v1" }
            }),
            "application/vnd.kubernetes.protobuf"
        );
        assert_eq!(output_content_type(Output::JSON), "application/json");
    }
}
