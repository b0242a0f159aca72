//! meta/v1 `WatchEvent` as upstream's protobuf watch stream carries it.
//!
//! A protobuf watch (`application/vnd.kubernetes.protobuf;stream=watch`) is a series
//! of frames, each a 4-byte big-endian length followed by a *raw* `WatchEvent`
//! message (upstream's stream serializer is the raw protobuf serializer: no `k8s\0`
//! envelope). The event's `object` is a `RawExtension` whose bytes are the object's
//! full `k8s\0` + `runtime.Unknown` encoding.

use serde_json::Value;

use super::decode::message_to_json;
use super::schema;
use super::wire::put_len;
use super::{ProtobufError, encode};

const WATCH_EVENT: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent";

/// One raw `WatchEvent` message (unframed): `type` and the envelope of `object`.
pub fn encode_watch_event(event_type: &str, object: &Value) -> Result<Vec<u8>, ProtobufError> {
    let raw = encode(object)?;
    let mut ext = Vec::with_capacity(raw.len() + 8);
    put_len(&mut ext, 1, &raw);
    let mut out = Vec::with_capacity(ext.len() + event_type.len() + 8);
    put_len(&mut out, 1, event_type.as_bytes());
    put_len(&mut out, 2, &ext);
    Ok(out)
}

/// `encode_watch_event` behind its 4-byte big-endian length, as the stream carries it.
pub fn encode_watch_frame(event_type: &str, object: &Value) -> Result<Vec<u8>, ProtobufError> {
    let event = encode_watch_event(event_type, object)?;
    let len = u32::try_from(event.len()).map_err(|_| ProtobufError::Invalid {
        field: "WatchEvent".into(),
        reason: "event larger than 4 GiB".into(),
    })?;
    let mut out = Vec::with_capacity(event.len() + 4);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&event);
    Ok(out)
}

/// Decodes one raw `WatchEvent` message (without its length prefix) into
/// `(type, object)`, the object in its JSON wire form.
pub fn decode_watch_event(bytes: &[u8]) -> Result<(String, Value), ProtobufError> {
    let msg = schema::message_by_name(WATCH_EVENT).ok_or_else(|| ProtobufError::Invalid {
        field: "WatchEvent".into(),
        reason: "no WatchEvent message in the field table".into(),
    })?;
    let v = message_to_json(msg, bytes, 0)?.unwrap_or(Value::Null);
    let kind = v
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let object = v.get("object").cloned().unwrap_or(Value::Null);
    Ok((kind, object))
}

/// Splits a protobuf watch body into its frames' `WatchEvent` messages.
pub fn split_watch_frames(mut body: &[u8]) -> Result<Vec<&[u8]>, ProtobufError> {
    let mut frames = Vec::new();
    while !body.is_empty() {
        let Some((len, rest)) = body.split_first_chunk::<4>() else {
            return Err(ProtobufError::Truncated);
        };
        let len = u32::from_be_bytes(*len) as usize;
        if rest.len() < len {
            return Err(ProtobufError::Truncated);
        }
        let (frame, rest) = rest.split_at(len);
        frames.push(frame);
        body = rest;
    }
    Ok(frames)
}
