//! Tables of custom resources: a Name column, then the CRD version's
//! `additionalPrinterColumns` evaluated by JSONPath, as upstream's
//! apiextensions `tableconvertor`.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::{NAME, format};
use crate::crd::CustomResource;
use crate::jsonpath::JsonPath;

/// The column definitions (`columnDefinitions`) of a custom resource's Table.
pub fn columns(cr: &CustomResource) -> Vec<Value> {
    std::iter::once(NAME.definition())
        .chain(cr.printer_columns.iter().map(|c| {
            json!({
                "name": c.name,
                "type": c.type_,
                "format": c.format,
                "description": c.description,
                "priority": c.priority,
            })
        }))
        .collect()
}

/// One row's cells: the name, then each column's first JSONPath result (`null`
/// when the path finds nothing or the value has the wrong type).
pub fn cells(cr: &CustomResource, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    std::iter::once(Value::from(format::name(obj)))
        .chain(cr.printer_columns.iter().map(|c| {
            let Ok(path) = JsonPath::parse(&c.json_path) else {
                return Value::Null;
            };
            match path.find(obj).first() {
                Some(v) => cell(&c.type_, v, now),
                None => Value::Null,
            }
        }))
        .collect()
}

/// Upstream's `cellForJSONValue`; strings print as client-go's jsonpath prints
/// (scalars bare, objects and arrays as JSON).
fn cell(type_: &str, v: &Value, now: DateTime<Utc>) -> Value {
    match (type_, v) {
        (_, Value::Null) => Value::Null,
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, Value::from),
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, Value::from),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("date", Value::String(s)) => match DateTime::parse_from_rfc3339(s) {
            Ok(t) => Value::from(format::since(Some(t.with_timezone(&Utc)), now)),
            Err(_) => Value::from("<invalid>"),
        },
        ("string", Value::String(s)) => Value::from(s.as_str()),
        ("string", other) => Value::from(other.to_string()),
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::PrinterColumn;
    use crate::printers::testutil::{ago, now};

    fn col(name: &str, type_: &str, path: &str) -> PrinterColumn {
        PrinterColumn {
            name: name.into(),
            type_: type_.into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            json_path: path.into(),
        }
    }

    #[test]
    fn cells_follow_column_types() {
        let cr = CustomResource {
            crd_name: "crontabs.stable.example.com",
            crd_uid: "u",
            schema: None,
            printer_columns: vec![
                col("Spec", "string", ".spec.cronSpec"),
                col("Replicas", "integer", ".spec.replicas"),
                col("Ratio", "number", ".spec.ratio"),
                col("On", "boolean", ".spec.on"),
                col("Age", "date", ".metadata.creationTimestamp"),
                col("Missing", "string", ".spec.nope"),
                col("Wrong", "integer", ".spec.cronSpec"),
                col("Obj", "string", ".spec.obj"),
                col(
                    "Ready",
                    "string",
                    ".status.conditions[?(@.type==\"Ready\")].status",
                ),
            ],
            scale: None,
            selectable_fields: vec![],
            deprecation_warning: None,
            terminating: false,
        };
        let obj = json!({
            "metadata": {"name": "my-cron", "creationTimestamp": ago(300)},
            "spec": {"cronSpec": "* * * * */5", "replicas": 3, "ratio": 1.5, "on": true, "obj": {"a": 1}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        });
        assert_eq!(
            cells(&cr, &obj, now()),
            vec![
                json!("my-cron"),
                json!("* * * * */5"),
                json!(3),
                json!(1.5),
                json!(true),
                json!("5m"),
                Value::Null,
                Value::Null,
                json!("{\"a\":1}"),
                json!("True"),
            ]
        );
        let defs = columns(&cr);
        assert_eq!(defs[0]["name"], "Name");
        assert_eq!(defs[0]["format"], "name");
        assert_eq!(defs[1]["name"], "Spec");
        assert_eq!(defs.len(), 10);
    }
}
