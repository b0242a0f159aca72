//! JSON → protobuf, for serving clients that accept only protobuf.

use chrono::{DateTime, Timelike};
use serde_json::Value;

use super::schema::{self, Card, INLINE, Message, Special, Ty};
use super::wire::{self, put_key, put_len, put_varint};
use super::{MAGIC, MAX_DEPTH, ProtobufError, base64, invalid};

/// Encodes an object (with `apiVersion` and `kind`) as `k8s\0` + `runtime.Unknown`.
/// Fields the table does not know are dropped, as a Go client's typed decode would.
pub fn encode(obj: &Value) -> Result<Vec<u8>, ProtobufError> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    let msg =
        schema::message_for_kind(api_version, kind).ok_or_else(|| ProtobufError::UnknownKind {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        })?;
    let mut raw = Vec::new();
    message(msg, obj, &mut raw, 0)?;
    let mut type_meta = Vec::new();
    put_len(&mut type_meta, 1, api_version.as_bytes());
    put_len(&mut type_meta, 2, kind.as_bytes());
    let mut out = Vec::with_capacity(raw.len() + type_meta.len() + 16);
    out.extend_from_slice(MAGIC);
    put_len(&mut out, 1, &type_meta);
    put_len(&mut out, 2, &raw);
    // Go writes its non-pointer strings even when empty; so do we, byte for byte.
    put_len(&mut out, 3, b"");
    put_len(&mut out, 4, b"");
    Ok(out)
}

/// Writes the fields of `msg` found in `v` (the message's body, without its key).
fn message(
    msg: &'static Message,
    v: &Value,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::TooDeep(MAX_DEPTH));
    }
    match msg.special {
        Special::None => object(msg, v, out, depth),
        Special::Time | Special::MicroTime => {
            let s = v
                .as_str()
                .ok_or_else(|| invalid(msg, "", "expected an RFC 3339 time string"))?;
            let t = DateTime::parse_from_rfc3339(s)
                .map_err(|e| invalid(msg, "", format!("invalid time {s:?}: {e}")))?;
            put_key(out, 1, wire::VARINT);
            put_varint(out, t.timestamp() as u64);
            put_key(out, 2, wire::VARINT);
            put_varint(out, u64::from(t.nanosecond()));
            Ok(())
        }
        Special::Quantity => {
            let s = match v {
                Value::String(s) => s.clone(),
                // Quantities may be written as bare JSON numbers.
                Value::Number(n) => n.to_string(),
                _ => return Err(invalid(msg, "", "expected a quantity string")),
            };
            put_len(out, 1, s.as_bytes());
            Ok(())
        }
        Special::IntOrString => {
            let (kind, int, s) = match v {
                Value::Number(n) => {
                    let i = n
                        .as_i64()
                        .and_then(|i| i32::try_from(i).ok())
                        .ok_or_else(|| invalid(msg, "", format!("{n} is not an int32")))?;
                    (0u64, i, "")
                }
                Value::String(s) => (1, 0, s.as_str()),
                _ => return Err(invalid(msg, "", "expected an integer or a string")),
            };
            put_key(out, 1, wire::VARINT);
            put_varint(out, kind);
            put_key(out, 2, wire::VARINT);
            put_varint(out, i64::from(int) as u64);
            put_len(out, 3, s.as_bytes());
            Ok(())
        }
        Special::StringList => {
            let items = v
                .as_array()
                .ok_or_else(|| invalid(msg, "", "expected an array of strings"))?;
            for item in items {
                let s = item
                    .as_str()
                    .ok_or_else(|| invalid(msg, "", "expected an array of strings"))?;
                put_len(out, 1, s.as_bytes());
            }
            Ok(())
        }
        Special::RawJson => {
            let raw = serde_json::to_vec(v).map_err(|e| invalid(msg, "raw", e.to_string()))?;
            put_len(out, 1, &raw);
            Ok(())
        }
    }
}

fn object(
    msg: &'static Message,
    v: &Value,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), ProtobufError> {
    let obj = match v {
        Value::Object(o) => o,
        Value::Null => return Ok(()),
        _ => return Err(invalid(msg, "", "expected an object")),
    };
    for f in msg.fields {
        if f.has(INLINE) {
            // JSON flattens the embedded struct; the wire nests it.
            let Ty::Msg(i) = f.ty else {
                return Err(invalid(msg, f.json, "inline field is not a message"));
            };
            let mut buf = Vec::new();
            message(schema::message(i), v, &mut buf, depth + 1)?;
            put_len(out, f.number, &buf);
            continue;
        }
        let Some(val) = obj.get(f.json).filter(|v| !v.is_null()) else {
            continue;
        };
        match f.card {
            Card::One => value(msg, f.json, f.number, f.ty, val, out, depth)?,
            Card::Rep => {
                let items = val
                    .as_array()
                    .ok_or_else(|| invalid(msg, f.json, "expected an array"))?;
                for item in items {
                    value(msg, f.json, f.number, f.ty, item, out, depth)?;
                }
            }
            Card::Map(key_ty) => {
                let map = val
                    .as_object()
                    .ok_or_else(|| invalid(msg, f.json, "expected an object"))?;
                // Go writes map entries sorted by key.
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                for k in keys {
                    let mut entry = Vec::new();
                    let key = match key_ty {
                        Ty::Str => Value::String(k.clone()),
                        _ => serde_json::from_str(k)
                            .map_err(|_| invalid(msg, f.json, format!("bad map key {k:?}")))?,
                    };
                    value(msg, f.json, 1, key_ty, &key, &mut entry, depth)?;
                    if let Some(val) = map.get(k).filter(|v| !v.is_null()) {
                        value(msg, f.json, 2, f.ty, val, &mut entry, depth)?;
                    }
                    put_len(out, f.number, &entry);
                }
            }
        }
    }
    Ok(())
}

/// Writes one value of `ty` as field `number`.
fn value(
    msg: &'static Message,
    json: &str,
    number: u32,
    ty: Ty,
    v: &Value,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), ProtobufError> {
    let bad = |what: &str| invalid(msg, json, format!("expected {what}, got {v}"));
    match ty {
        Ty::Str => put_len(
            out,
            number,
            v.as_str().ok_or_else(|| bad("a string"))?.as_bytes(),
        ),
        Ty::Bytes => {
            let s = v.as_str().ok_or_else(|| bad("a base64 string"))?;
            let b = base64::decode(s).ok_or_else(|| bad("a base64 string"))?;
            put_len(out, number, &b);
        }
        Ty::Bool => {
            put_key(out, number, wire::VARINT);
            put_varint(out, u64::from(v.as_bool().ok_or_else(|| bad("a boolean"))?));
        }
        Ty::I32 => {
            let i = v
                .as_i64()
                .and_then(|i| i32::try_from(i).ok())
                .ok_or_else(|| bad("an int32"))?;
            put_key(out, number, wire::VARINT);
            put_varint(out, i64::from(i) as u64);
        }
        Ty::I64 => {
            let i = v.as_i64().ok_or_else(|| bad("an int64"))?;
            put_key(out, number, wire::VARINT);
            put_varint(out, i as u64);
        }
        Ty::U32 => {
            let i = v
                .as_u64()
                .and_then(|i| u32::try_from(i).ok())
                .ok_or_else(|| bad("a uint32"))?;
            put_key(out, number, wire::VARINT);
            put_varint(out, u64::from(i));
        }
        Ty::U64 => {
            let i = v.as_u64().ok_or_else(|| bad("a uint64"))?;
            put_key(out, number, wire::VARINT);
            put_varint(out, i);
        }
        Ty::F64 => {
            let x = v.as_f64().ok_or_else(|| bad("a number"))?;
            put_key(out, number, wire::FIXED64);
            out.extend_from_slice(&x.to_bits().to_le_bytes());
        }
        Ty::F32 => {
            let x = v.as_f64().ok_or_else(|| bad("a number"))? as f32;
            put_key(out, number, wire::FIXED32);
            out.extend_from_slice(&x.to_bits().to_le_bytes());
        }
        Ty::Msg(i) => {
            let mut buf = Vec::new();
            // A special message's errors (no field of its own) name the holding field.
            message(schema::message(i), v, &mut buf, depth + 1).map_err(|e| match e {
                ProtobufError::Invalid { field, reason } if field.ends_with('.') => {
                    invalid(msg, json, reason)
                }
                other => other,
            })?;
            put_len(out, number, &buf);
        }
    }
    Ok(())
}
