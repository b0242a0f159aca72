//! The shape of the generated field table (`table.rs`) and lookups over it.

use super::table::{KINDS, MESSAGES};

/// A field's value type on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Str,
    Bytes,
    Bool,
    I32,
    I64,
    U32,
    U64,
    F64,
    F32,
    /// An index into `MESSAGES`.
    Msg(u16),
}

/// Cardinality: one value, a repeated field, or a map (the key type here, the
/// value type in `Field::ty`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Card {
    One,
    Rep,
    Map(Ty),
}

/// Messages whose JSON form is not an object of their proto fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Special {
    None,
    /// meta/v1 Time: {seconds, nanos} ↔ RFC 3339 with seconds precision.
    Time,
    /// meta/v1 MicroTime: {seconds, nanos} ↔ RFC 3339 with microseconds.
    MicroTime,
    /// runtime.RawExtension and meta/v1 FieldsV1: bytes holding JSON.
    RawJson,
    /// resource.Quantity: {string} ↔ a string.
    Quantity,
    /// intstr.IntOrString: {type, intVal, strVal} ↔ a number or a string.
    IntOrString,
    /// A Go `[]string` type (meta/v1 Verbs, ExtraValue): {repeated items} ↔ an array.
    StringList,
}

/// The Go field's `json:",omitempty"`: zero scalars are left out of JSON.
pub const OMITEMPTY: u8 = 1;
/// The Go field is a pointer: presence on the wire is presence in JSON.
pub const POINTER: u8 = 2;
/// `json:",inline"`: a nested message on the wire, flattened into the parent in JSON.
pub const INLINE: u8 = 4;

#[derive(Debug)]
pub struct Field {
    pub number: u32,
    /// The JSON name ("" for inline fields).
    pub json: &'static str,
    pub ty: Ty,
    pub card: Card,
    pub flags: u8,
}

impl Field {
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

#[derive(Debug)]
pub struct Message {
    /// The full proto name, e.g. `k8s.io.api.core.v1.Pod`.
    pub name: &'static str,
    pub special: Special,
    /// The Go struct embeds TypeMeta (a kind that travels in an envelope).
    pub top_level: bool,
    /// Sorted by field number.
    pub fields: &'static [Field],
}

impl Message {
    pub fn field(&self, number: u32) -> Option<&'static Field> {
        self.fields
            .binary_search_by_key(&number, |f| f.number)
            .ok()
            .map(|i| &self.fields[i])
    }

    /// The short name (`Pod`).
    pub fn short_name(&self) -> &'static str {
        self.name.rsplit('.').next().unwrap_or(self.name)
    }
}

/// The message of an index from the table (the generator emits only valid indices;
/// the `every_message_index_resolves_and_fields_are_sorted` test checks them all).
pub fn message(index: u16) -> &'static Message {
    &MESSAGES[usize::from(index)]
}

/// The message for an `apiVersion`/`kind`. meta/v1 kinds (DeleteOptions, Status, …)
/// are accepted under any group-version, as upstream registers them in every one.
pub fn message_for_kind(api_version: &str, kind: &str) -> Option<&'static Message> {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    // autoscaling/v2beta2 (served for the seed article) has v2's field numbers.
    // networking.k8s.io/v1beta1 (served for the seed article) is mapped onto v1's
    // messages: IngressClass has one shape; a v1beta1 Ingress's backends
    // (serviceName/servicePort) have no v1 field numbers and are not encoded.
    let version = match (group, version) {
        ("autoscaling", "v2beta2") => "v2",
        ("networking.k8s.io", "v1beta1") => "v1",
        _ => version,
    };
    let exact = KINDS
        .iter()
        .find(|(g, v, k, _)| *g == group && *v == version && *k == kind);
    let meta = || {
        KINDS
            .iter()
            .find(|(g, v, k, _)| *g == "meta.k8s.io" && *v == "v1" && *k == kind)
    };
    exact.or_else(meta).map(|&(_, _, _, i)| message(i))
}

/// A message by its full proto name (`k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent`).
pub fn message_by_name(name: &str) -> Option<&'static Message> {
    MESSAGES
        .binary_search_by(|m| m.name.cmp(name))
        .ok()
        .map(|i| &MESSAGES[i])
}
