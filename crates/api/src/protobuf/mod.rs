//! Kubernetes protobuf bodies (`application/vnd.kubernetes.protobuf`).
//!
//! Upstream's protobuf serializer writes the magic `k8s\0` followed by a
//! `runtime.Unknown` message: `typeMeta` (apiVersion, kind), `raw` (the object's
//! own message), `contentEncoding` and `contentType`. The object's message has no
//! TypeMeta; its fields follow `generated.proto`. Berth handles objects as JSON, so
//! this module converts between that wire form and the JSON a client would have
//! sent, driven by a generated field table (`table.rs`, see its header) rather than
//! by generated Rust types.

mod base64;
mod decode;
mod encode;
mod omitempty;
pub mod schema;
mod table;
mod watch;
mod wire;

#[cfg(test)]
mod tests;

pub use decode::decode;
pub use encode::encode;
pub use omitempty::omit_empty;
pub use watch::{decode_watch_event, encode_watch_event, encode_watch_frame, split_watch_frames};

/// The magic prefix of every Kubernetes protobuf body.
pub const MAGIC: &[u8; 4] = b"k8s\0";
/// The media type of Kubernetes protobuf bodies.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of a protobuf watch stream (length-prefixed raw `WatchEvent`s).
pub const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// Why a body could not be converted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProtobufError {
    #[error(
        "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
    )]
    BadMagic,
    #[error("empty protobuf body")]
    Empty,
    #[error("truncated protobuf message")]
    Truncated,
    #[error("protobuf varint is longer than 64 bits")]
    VarintOverflow,
    #[error("invalid protobuf field number")]
    BadFieldNumber,
    #[error("unsupported protobuf wire type {0}")]
    UnsupportedWireType(u8),
    #[error("field {field}: wire type {got} does not match the field's type")]
    WrongWireType { field: String, got: u8 },
    #[error("no protobuf message is known for apiVersion {api_version:?}, kind {kind:?}")]
    UnknownKind { api_version: String, kind: String },
    #[error("unsupported protobuf content encoding {0:?}")]
    ContentEncoding(String),
    #[error("field {field}: {reason}")]
    Invalid { field: String, reason: String },
    #[error("protobuf message nested deeper than {0} levels")]
    TooDeep(usize),
}

/// Deepest nesting accepted (real objects stay far below it; it bounds recursion
/// through RawExtensions holding further envelopes).
const MAX_DEPTH: usize = 100;

fn invalid(msg: &schema::Message, json: &str, reason: impl Into<String>) -> ProtobufError {
    ProtobufError::Invalid {
        field: format!("{}.{json}", msg.short_name()),
        reason: reason.into(),
    }
}
