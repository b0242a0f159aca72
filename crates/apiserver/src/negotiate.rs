//! Response shapes a client can ask for in `Accept`: plain JSON, a server-side
//! `Table` (what `kubectl get` prints), or `PartialObjectMetadata`.

use berth_api::printers;
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

/// Picks the first media type in `Accept` that the server can produce.
pub fn shape(accept: &str) -> ApiResult<Shape> {
    if accept.trim().is_empty() {
        return Ok(Shape::Object);
    }
    for item in accept.split(',') {
        let mut parts = item.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        let mut as_ = None;
        let mut g = None;
        let mut v = None;
        for p in parts {
            match p.split_once('=') {
                Some(("as", x)) => as_ = Some(x),
                Some(("g", x)) => g = Some(x),
                Some(("v", x)) => v = Some(x),
                _ => {}
            }
        }
        let json_like = matches!(
            media,
            "application/json" | "application/*" | "*/*" | "application/yaml"
        );
        if !json_like {
            continue;
        }
        let version = match v {
            Some("v1") | None => "v1",
            Some("v1beta1") => "v1beta1",
            Some(_) => continue,
        };
        match (as_, g) {
            (None, _) => return Ok(Shape::Object),
            (Some("Table"), Some("meta.k8s.io")) => return Ok(Shape::Table { version }),
            (
                Some("PartialObjectMetadata") | Some("PartialObjectMetadataList"),
                Some("meta.k8s.io"),
            ) => {
                return Ok(Shape::Metadata { version });
            }
            _ => continue,
        }
    }
    Err(ApiError::not_acceptable())
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

/// A Table of `items`; `list_meta` becomes the Table's metadata.
pub fn table(
    rt: &ResourceType,
    items: &[Value],
    list_meta: Value,
    include: Include,
    version: &str,
    with_columns: bool,
) -> Value {
    let now = chrono::Utc::now();
    let columns: Vec<Value> = if with_columns {
        printers::columns(rt.group, rt.kind)
            .iter()
            .map(|c| {
                json!({
                    "name": c.name,
                    "type": c.type_,
                    "format": c.format,
                    "description": c.description,
                    "priority": c.priority,
                })
            })
            .collect()
    } else {
        Vec::new()
    };
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut row = json!({ "cells": printers::cells(rt.group, rt.kind, o, now) });
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

    #[test]
    fn accept_headers() {
        let kubectl_get = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(shape(kubectl_get).unwrap(), Shape::Table { version: "v1" });
        assert_eq!(shape("application/json").unwrap(), Shape::Object);
        assert_eq!(shape("").unwrap(), Shape::Object);
        assert_eq!(
            shape("application/vnd.kubernetes.protobuf, */*").unwrap(),
            Shape::Object
        );
        assert_eq!(
            shape("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1").unwrap(),
            Shape::Metadata { version: "v1" }
        );
        assert_eq!(
            shape("application/vnd.kubernetes.protobuf")
                .unwrap_err()
                .code,
            406
        );
        assert_eq!(
            shape("application/json;as=Frob;g=meta.k8s.io;v=v1")
                .unwrap_err()
                .code,
            406
        );
    }
}
