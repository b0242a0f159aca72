//! Protobuf → JSON, in the form Go's encoding/json gives the same object.

use chrono::DateTime;
use serde_json::{Map, Number, Value};

use super::schema::{self, Card, Field, INLINE, Message, OMITEMPTY, POINTER, Special, Ty};
use super::wire::{Raw, Reader};
use super::{CONTENT_TYPE, MAGIC, MAX_DEPTH, ProtobufError, base64, invalid};

/// Decodes a `k8s\0` + `runtime.Unknown` body into the object's JSON wire form,
/// `apiVersion` and `kind` first.
pub fn decode(bytes: &[u8]) -> Result<Value, ProtobufError> {
    decode_envelope(bytes, 0)
}

fn decode_envelope(bytes: &[u8], depth: usize) -> Result<Value, ProtobufError> {
    let body = bytes.strip_prefix(MAGIC).ok_or(ProtobufError::BadMagic)?;
    if body.is_empty() {
        return Err(ProtobufError::Empty);
    }
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    let mut content_encoding = String::new();
    let mut content_type = String::new();
    let unknown = envelope_message();
    let mut r = Reader::new(body);
    while !r.done() {
        match r.field()? {
            (1, Raw::Len(tm)) => {
                let mut t = Reader::new(tm);
                while !t.done() {
                    match t.field()? {
                        (1, Raw::Len(b)) => api_version = utf8(unknown, "apiVersion", b)?,
                        (2, Raw::Len(b)) => kind = utf8(unknown, "kind", b)?,
                        (1 | 2, other) => return Err(wrong(unknown, "typeMeta", other)),
                        _ => {}
                    }
                }
            }
            (2, Raw::Len(b)) => raw = b,
            (3, Raw::Len(b)) => content_encoding = utf8(unknown, "contentEncoding", b)?,
            (4, Raw::Len(b)) => content_type = utf8(unknown, "contentType", b)?,
            (n @ 1..=4, other) => {
                let name = ["typeMeta", "raw", "contentEncoding", "contentType"][n as usize - 1];
                return Err(wrong(unknown, name, other));
            }
            _ => {}
        }
    }
    if !content_encoding.is_empty() {
        return Err(ProtobufError::ContentEncoding(content_encoding));
    }
    let mut out = Map::new();
    out.insert("apiVersion".into(), Value::String(api_version.clone()));
    out.insert("kind".into(), Value::String(kind.clone()));
    // An Unknown may carry JSON (upstream wraps non-protobuf objects that way).
    if content_type.starts_with("application/json") {
        let obj: Value = serde_json::from_slice(raw)
            .map_err(|e| invalid(unknown, "raw", format!("invalid JSON: {e}")))?;
        if let Value::Object(fields) = obj {
            out.extend(
                fields
                    .into_iter()
                    .filter(|(k, _)| k != "apiVersion" && k != "kind"),
            );
        }
        return Ok(Value::Object(out));
    }
    if !content_type.is_empty() && content_type != CONTENT_TYPE {
        return Err(invalid(
            unknown,
            "contentType",
            format!("unsupported content type {content_type:?}"),
        ));
    }
    let msg = schema::message_for_kind(&api_version, &kind)
        .ok_or(ProtobufError::UnknownKind { api_version, kind })?;
    if let Some(Value::Object(fields)) = message_to_json(msg, raw, depth + 1)? {
        out.extend(fields);
    }
    Ok(Value::Object(out))
}

/// `runtime.Unknown`, for error messages.
fn envelope_message() -> &'static Message {
    static UNKNOWN: Message = Message {
        name: "k8s.io.apimachinery.pkg.runtime.Unknown",
        special: Special::None,
        top_level: false,
        fields: &[],
    };
    &UNKNOWN
}

fn wrong(msg: &Message, json: &str, raw: Raw<'_>) -> ProtobufError {
    ProtobufError::WrongWireType {
        field: format!("{}.{json}", msg.short_name()),
        got: raw.wire_type(),
    }
}

fn utf8(msg: &Message, json: &str, b: &[u8]) -> Result<String, ProtobufError> {
    String::from_utf8(b.to_vec()).map_err(|_| invalid(msg, json, "invalid UTF-8"))
}

/// Converts one message. `None` where Go's JSON would write `null` (a zero Time, an
/// empty RawExtension), which callers leave out.
pub(super) fn message_to_json(
    msg: &'static Message,
    bytes: &[u8],
    depth: usize,
) -> Result<Option<Value>, ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(ProtobufError::TooDeep(MAX_DEPTH));
    }
    match msg.special {
        Special::None => object(msg, bytes, depth).map(|o| Some(Value::Object(o))),
        Special::Time | Special::MicroTime => time(msg, bytes),
        Special::Quantity => {
            let mut s = String::from("0");
            let mut r = Reader::new(bytes);
            while !r.done() {
                match r.field()? {
                    (1, Raw::Len(b)) if !b.is_empty() => s = utf8(msg, "string", b)?,
                    (1, Raw::Len(_)) => {}
                    (1, other) => return Err(wrong(msg, "string", other)),
                    _ => {}
                }
            }
            Ok(Some(Value::String(s)))
        }
        Special::IntOrString => {
            let (mut is_str, mut int, mut s) = (false, 0i64, String::new());
            let mut r = Reader::new(bytes);
            while !r.done() {
                match r.field()? {
                    (1, Raw::Varint(v)) => is_str = v == 1,
                    (2, Raw::Varint(v)) => int = i64::from(v as i32),
                    (3, Raw::Len(b)) => s = utf8(msg, "strVal", b)?,
                    (n @ 1..=3, other) => {
                        return Err(wrong(
                            msg,
                            ["type", "intVal", "strVal"][n as usize - 1],
                            other,
                        ));
                    }
                    _ => {}
                }
            }
            Ok(Some(if is_str {
                Value::String(s)
            } else {
                Value::Number(int.into())
            }))
        }
        Special::StringList => {
            let mut items = Vec::new();
            let mut r = Reader::new(bytes);
            while !r.done() {
                match r.field()? {
                    (1, Raw::Len(b)) => items.push(Value::String(utf8(msg, "items", b)?)),
                    (1, other) => return Err(wrong(msg, "items", other)),
                    _ => {}
                }
            }
            Ok(Some(Value::Array(items)))
        }
        Special::RawJson => {
            let mut raw: &[u8] = &[];
            let mut r = Reader::new(bytes);
            while !r.done() {
                match r.field()? {
                    (1, Raw::Len(b)) => raw = b,
                    (1, other) => return Err(wrong(msg, "raw", other)),
                    _ => {}
                }
            }
            if raw.is_empty() {
                return Ok(None);
            }
            if raw.starts_with(MAGIC) {
                return decode_envelope(raw, depth + 1).map(Some);
            }
            serde_json::from_slice(raw)
                .map(Some)
                .map_err(|e| invalid(msg, "raw", format!("invalid JSON: {e}")))
        }
    }
}

/// Time and MicroTime: `{seconds, nanos}`. Empty is Go's zero time (JSON null).
fn time(msg: &'static Message, bytes: &[u8]) -> Result<Option<Value>, ProtobufError> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let (mut secs, mut nanos) = (0i64, 0u32);
    let mut r = Reader::new(bytes);
    while !r.done() {
        match r.field()? {
            (1, Raw::Varint(v)) => secs = v as i64,
            (2, Raw::Varint(v)) => nanos = u32::try_from(v as i32).unwrap_or(0),
            (1, other) => return Err(wrong(msg, "seconds", other)),
            (2, other) => return Err(wrong(msg, "nanos", other)),
            _ => {}
        }
    }
    let micro = msg.special == Special::MicroTime;
    // Time's Unmarshal keeps whole seconds only (its JSON has no fraction).
    let t = DateTime::from_timestamp(secs, if micro { nanos } else { 0 })
        .ok_or_else(|| invalid(msg, "seconds", format!("time out of range: {secs}")))?;
    let fmt = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(Some(Value::String(t.format(fmt).to_string())))
}

fn object(
    msg: &'static Message,
    bytes: &[u8],
    depth: usize,
) -> Result<Map<String, Value>, ProtobufError> {
    // Raw values per field (in table order); unknown fields are skipped, as proto does.
    let mut slots: Vec<Vec<Raw<'_>>> = vec![Vec::new(); msg.fields.len()];
    let mut r = Reader::new(bytes);
    while !r.done() {
        let (number, raw) = r.field()?;
        if let Ok(i) = msg.fields.binary_search_by_key(&number, |f| f.number) {
            slots[i].push(raw);
        }
    }
    let mut out = Map::new();
    for (f, raws) in msg.fields.iter().zip(slots) {
        match f.card {
            Card::One if f.has(INLINE) => {
                let Ty::Msg(i) = f.ty else {
                    return Err(invalid(msg, f.json, "inline field is not a message"));
                };
                let bytes = match raws.last() {
                    Some(Raw::Len(b)) => *b,
                    Some(other) => return Err(wrong(msg, f.json, *other)),
                    None => &[],
                };
                if let Some(Value::Object(inner)) =
                    message_to_json(schema::message(i), bytes, depth + 1)?
                {
                    out.extend(inner);
                }
            }
            Card::One => {
                let value = match raws.last() {
                    Some(raw) => value(msg, f, f.ty, *raw, depth)?,
                    // Go decodes an absent pointer as nil and anything else as its zero.
                    None if f.has(POINTER) => None,
                    None => zero(f.ty, depth)?,
                };
                if let Some(v) = value
                    && (f.has(POINTER) || !(f.has(OMITEMPTY) && is_zero(f.ty, &v)))
                {
                    out.insert(f.json.to_string(), v);
                }
            }
            // Go's nil slice is `null` or omitted; both mean absent, so leave it out.
            Card::Rep if raws.is_empty() => {}
            Card::Rep => {
                let mut items = Vec::with_capacity(raws.len());
                for raw in raws {
                    match raw {
                        Raw::Len(b) if is_packable(f.ty) => unpack(msg, f, b, &mut items)?,
                        raw => items.push(value(msg, f, f.ty, raw, depth)?.unwrap_or(Value::Null)),
                    }
                }
                out.insert(f.json.to_string(), Value::Array(items));
            }
            Card::Map(_) if raws.is_empty() => {}
            Card::Map(key_ty) => {
                let mut map = Map::new();
                for raw in raws {
                    let Raw::Len(entry) = raw else {
                        return Err(wrong(msg, f.json, raw));
                    };
                    let (mut key, mut val) = (None, None);
                    let mut er = Reader::new(entry);
                    while !er.done() {
                        match er.field()? {
                            (1, raw) => key = Some(value(msg, f, key_ty, raw, depth)?),
                            (2, raw) => val = Some(value(msg, f, f.ty, raw, depth)?),
                            _ => {}
                        }
                    }
                    let key = match key.flatten().or(zero(key_ty, depth)?) {
                        Some(Value::String(s)) => s,
                        Some(other) => other.to_string(),
                        None => String::new(),
                    };
                    let val = match val {
                        Some(v) => v,
                        None => zero(f.ty, depth)?,
                    };
                    map.insert(key, val.unwrap_or(Value::Null));
                }
                out.insert(f.json.to_string(), Value::Object(map));
            }
        }
    }
    Ok(out)
}

fn is_packable(ty: Ty) -> bool {
    !matches!(ty, Ty::Str | Ty::Bytes | Ty::Msg(_))
}

/// A packed repeated scalar field (Go's proto2 writes them unpacked, but decoders
/// must accept both).
fn unpack(
    msg: &'static Message,
    f: &Field,
    bytes: &[u8],
    items: &mut Vec<Value>,
) -> Result<(), ProtobufError> {
    let width = match f.ty {
        Ty::F64 => 8,
        Ty::F32 => 4,
        _ => 0,
    };
    if width > 0 {
        if !bytes.len().is_multiple_of(width) {
            return Err(ProtobufError::Truncated);
        }
        for chunk in bytes.chunks(width) {
            let raw = if width == 8 {
                let mut a = [0u8; 8];
                a.copy_from_slice(chunk);
                Raw::Fixed64(u64::from_le_bytes(a))
            } else {
                let mut a = [0u8; 4];
                a.copy_from_slice(chunk);
                Raw::Fixed32(u32::from_le_bytes(a))
            };
            items.push(value(msg, f, f.ty, raw, 0)?.unwrap_or(Value::Null));
        }
        return Ok(());
    }
    let mut r = Reader::new(bytes);
    while !r.done() {
        let raw = Raw::Varint(r.varint()?);
        items.push(value(msg, f, f.ty, raw, 0)?.unwrap_or(Value::Null));
    }
    Ok(())
}

/// One value of a field's type.
fn value(
    msg: &'static Message,
    f: &Field,
    ty: Ty,
    raw: Raw<'_>,
    depth: usize,
) -> Result<Option<Value>, ProtobufError> {
    let v = match (ty, raw) {
        (Ty::Str, Raw::Len(b)) => Value::String(utf8(msg, f.json, b)?),
        (Ty::Bytes, Raw::Len(b)) => Value::String(base64::encode(b)),
        (Ty::Bool, Raw::Varint(v)) => Value::Bool(v != 0),
        // Negative int32s are sign-extended to 64 bits on the wire.
        (Ty::I32, Raw::Varint(v)) => Value::Number(i64::from(v as i32).into()),
        (Ty::I64, Raw::Varint(v)) => Value::Number((v as i64).into()),
        (Ty::U32, Raw::Varint(v)) => Value::Number(u64::from(v as u32).into()),
        (Ty::U64, Raw::Varint(v)) => Value::Number(v.into()),
        (Ty::F64, Raw::Fixed64(v)) => float(msg, f, f64::from_bits(v))?,
        (Ty::F32, Raw::Fixed32(v)) => float(msg, f, f64::from(f32::from_bits(v)))?,
        (Ty::Msg(i), Raw::Len(b)) => return message_to_json(schema::message(i), b, depth + 1),
        (_, raw) => return Err(wrong(msg, f.json, raw)),
    };
    Ok(Some(v))
}

fn float(msg: &Message, f: &Field, x: f64) -> Result<Value, ProtobufError> {
    Number::from_f64(x)
        .map(Value::Number)
        .ok_or_else(|| invalid(msg, f.json, format!("{x} is not a JSON number")))
}

/// What Go's JSON writes for a non-pointer field that was not on the wire.
fn zero(ty: Ty, depth: usize) -> Result<Option<Value>, ProtobufError> {
    Ok(match ty {
        Ty::Str => Some(Value::String(String::new())),
        // A nil []byte is null.
        Ty::Bytes => None,
        Ty::Bool => Some(Value::Bool(false)),
        Ty::I32 | Ty::I64 | Ty::U32 | Ty::U64 => Some(Value::Number(0.into())),
        Ty::F64 | Ty::F32 => Number::from_f64(0.0).map(Value::Number),
        Ty::Msg(i) => message_to_json(schema::message(i), &[], depth + 1)?,
    })
}

/// Whether `omitempty` drops the value. Structs are never empty to Go, except that
/// a zero IntOrString is upstream's "unset" (defaulting treats it so), so it is
/// left out rather than written as 0.
fn is_zero(ty: Ty, v: &Value) -> bool {
    match ty {
        Ty::Msg(i) => schema::message(i).special == Special::IntOrString && v.as_i64() == Some(0),
        _ => match v {
            Value::String(s) => s.is_empty(),
            Value::Bool(b) => !b,
            Value::Number(n) => n.as_f64() == Some(0.0),
            _ => false,
        },
    }
}
