//! gnostic's `openapi.v2.Document` protobuf (`openapiv2/OpenAPIv2.proto` in
//! github.com/google/gnostic-models), written from the Swagger JSON by hand: kubectl's
//! `proto.Unmarshal` into that message is the reader. Field numbers follow that file.
//!
//! Only the wire format's basics are needed: varints (wire type 0), 64-bit doubles (1)
//! and length-delimited strings and messages (2). Scalars equal to proto3's default are
//! left out, as Go's marshaller does, except inside a `oneof`, where presence is the
//! value. Messages present in the JSON are always written, even when empty: kubectl tells
//! `properties: {}` (an object kind) from no `properties` (a map) by presence.
//!
//! Values gnostic keeps as `Any` (vendor extensions, `enum`, `default`, `example`) are
//! written as `Any{yaml}` holding compact JSON, which is YAML: kubectl unmarshals that
//! text with a YAML parser.

use serde_json::{Map, Value};

const VARINT: u32 = 0;
const FIXED64: u32 = 1;
const LEN: u32 = 2;

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// A message being written.
struct W {
    buf: Vec<u8>,
}

impl W {
    fn key(&mut self, field: u32, wire: u32) {
        put_varint(&mut self.buf, u64::from((field << 3) | wire));
    }

    /// A singular string; empty is proto3's default and is left out.
    fn string(&mut self, field: u32, s: &str) {
        if !s.is_empty() {
            self.bytes(field, s.as_bytes());
        }
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, LEN);
        put_varint(&mut self.buf, b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    fn bool_always(&mut self, field: u32, b: bool) {
        self.key(field, VARINT);
        self.buf.push(u8::from(b));
    }

    fn bool(&mut self, field: u32, b: bool) {
        if b {
            self.bool_always(field, b);
        }
    }

    fn int64(&mut self, field: u32, v: i64) {
        if v != 0 {
            self.key(field, VARINT);
            // Negative int64s are ten-byte two's-complement varints.
            put_varint(&mut self.buf, v as u64);
        }
    }

    fn double(&mut self, field: u32, v: f64) {
        if v != 0.0 {
            self.key(field, FIXED64);
            self.buf.extend_from_slice(&v.to_le_bytes());
        }
    }

    /// A nested message: written in place, then its length is inserted before it (one
    /// move of its bytes per nesting level, no buffer per message).
    fn message(&mut self, field: u32, f: impl FnOnce(&mut W)) {
        self.key(field, LEN);
        let start = self.buf.len();
        f(self);
        let len = self.buf.len() - start;
        let mut prefix = Vec::with_capacity(10);
        put_varint(&mut prefix, len as u64);
        self.buf.splice(start..start, prefix);
    }

    // JSON helpers.

    fn str_field(&mut self, field: u32, o: &Map<String, Value>, key: &str) {
        if let Some(Value::String(s)) = o.get(key) {
            self.string(field, s);
        }
    }

    /// A repeated string: every element is written, empty or not.
    fn strings(&mut self, field: u32, v: Option<&Value>) {
        match v {
            Some(Value::Array(a)) => {
                for s in a.iter().filter_map(Value::as_str) {
                    self.bytes(field, s.as_bytes());
                }
            }
            Some(Value::String(s)) => self.bytes(field, s.as_bytes()),
            _ => {}
        }
    }

    fn bool_field(&mut self, field: u32, o: &Map<String, Value>, key: &str) {
        if let Some(Value::Bool(b)) = o.get(key) {
            self.bool(field, *b);
        }
    }

    fn int_field(&mut self, field: u32, o: &Map<String, Value>, key: &str) {
        if let Some(n) = o.get(key) {
            if let Some(i) = n.as_i64() {
                self.int64(field, i);
            } else if let Some(f) = n.as_f64() {
                self.int64(field, f as i64);
            }
        }
    }

    fn double_field(&mut self, field: u32, o: &Map<String, Value>, key: &str) {
        if let Some(f) = o.get(key).and_then(Value::as_f64) {
            self.double(field, f);
        }
    }

    /// `Any { yaml = 2 }`.
    fn any(&mut self, field: u32, v: &Value) {
        let yaml = serde_json::to_string(v).unwrap_or_default();
        self.message(field, |m| m.string(2, &yaml));
    }

    fn any_field(&mut self, field: u32, o: &Map<String, Value>, key: &str) {
        if let Some(v) = o.get(key) {
            self.any(field, v);
        }
    }

    fn anys(&mut self, field: u32, v: Option<&Value>) {
        if let Some(Value::Array(a)) = v {
            for x in a {
                self.any(field, x);
            }
        }
    }

    /// Every `x-…` key as `NamedAny { name = 1; Any value = 2 }`.
    fn extensions(&mut self, field: u32, o: &Map<String, Value>) {
        for (k, v) in o {
            if k.starts_with("x-") {
                self.message(field, |m| {
                    m.string(1, k);
                    m.any(2, v);
                });
            }
        }
    }
}

fn obj(v: &Value) -> Option<&Map<String, Value>> {
    v.as_object()
}

/// The Swagger 2.0 JSON document as `openapi.v2.Document`.
pub fn encode_document(doc: &Value) -> Vec<u8> {
    let mut w = W {
        buf: Vec::with_capacity(4 << 20),
    };
    let Some(d) = obj(doc) else {
        return w.buf;
    };
    w.str_field(1, d, "swagger");
    if let Some(info) = d.get("info").and_then(obj) {
        w.message(2, |m| write_info(m, info));
    }
    w.str_field(3, d, "host");
    w.str_field(4, d, "basePath");
    w.strings(5, d.get("schemes"));
    w.strings(6, d.get("consumes"));
    w.strings(7, d.get("produces"));
    if let Some(paths) = d.get("paths").and_then(obj) {
        w.message(8, |m| write_paths(m, paths));
    }
    if let Some(defs) = d.get("definitions").and_then(obj) {
        // Definitions { repeated NamedSchema additional_properties = 1 }
        w.message(9, |m| write_named_schemas(m, defs));
    }
    if let Some(params) = d.get("parameters").and_then(obj) {
        // ParameterDefinitions { repeated NamedParameter additional_properties = 1 }
        w.message(10, |m| {
            for (name, p) in params {
                m.message(1, |np| {
                    np.string(1, name);
                    if let Some(p) = obj(p) {
                        np.message(2, |pm| write_parameter(pm, p));
                    }
                });
            }
        });
    }
    if let Some(Value::Array(reqs)) = d.get("security") {
        for r in reqs.iter().filter_map(obj) {
            w.message(12, |m| write_security_requirement(m, r));
        }
    }
    if let Some(defs) = d.get("securityDefinitions").and_then(obj) {
        w.message(13, |m| {
            for (name, s) in defs {
                let Some(s) = obj(s) else { continue };
                m.message(1, |n| {
                    n.string(1, name);
                    n.message(2, |item| write_security_scheme(item, s));
                });
            }
        });
    }
    if let Some(Value::Array(tags)) = d.get("tags") {
        for t in tags.iter().filter_map(obj) {
            w.message(14, |m| {
                m.str_field(1, t, "name");
                m.str_field(2, t, "description");
                m.extensions(4, t);
            });
        }
    }
    w.extensions(16, d);
    w.buf
}

fn write_info(m: &mut W, info: &Map<String, Value>) {
    m.str_field(1, info, "title");
    m.str_field(2, info, "version");
    m.str_field(3, info, "description");
    m.str_field(4, info, "termsOfService");
    m.extensions(7, info);
}

/// `SecurityRequirement { repeated NamedStringArray additional_properties = 1 }`.
fn write_security_requirement(m: &mut W, r: &Map<String, Value>) {
    for (name, scopes) in r {
        m.message(1, |n| {
            n.string(1, name);
            n.message(2, |sa| sa.strings(1, Some(scopes)));
        });
    }
}

/// `SecurityDefinitionsItem`: basic (1) or apiKey (2); OAuth2 flows are not served.
fn write_security_scheme(m: &mut W, s: &Map<String, Value>) {
    match s.get("type").and_then(Value::as_str) {
        Some("basic") => m.message(1, |b| {
            b.str_field(1, s, "type");
            b.str_field(2, s, "description");
            b.extensions(3, s);
        }),
        Some("apiKey") => m.message(2, |k| {
            k.str_field(1, s, "type");
            k.str_field(2, s, "name");
            k.str_field(3, s, "in");
            k.str_field(4, s, "description");
            k.extensions(5, s);
        }),
        _ => {}
    }
}

/// `Paths { repeated NamedAny vendor_extension = 1; repeated NamedPathItem path = 2 }`.
fn write_paths(m: &mut W, paths: &Map<String, Value>) {
    m.extensions(1, paths);
    for (path, item) in paths {
        if path.starts_with("x-") {
            continue;
        }
        let Some(item) = obj(item) else { continue };
        m.message(2, |n| {
            n.string(1, path);
            n.message(2, |pi| write_path_item(pi, item));
        });
    }
}

fn write_path_item(m: &mut W, item: &Map<String, Value>) {
    m.str_field(1, item, "$ref");
    for (field, method) in [
        (2, "get"),
        (3, "put"),
        (4, "post"),
        (5, "delete"),
        (6, "options"),
        (7, "head"),
        (8, "patch"),
    ] {
        if let Some(op) = item.get(method).and_then(obj) {
            m.message(field, |o| write_operation(o, op));
        }
    }
    write_parameters_items(m, 9, item.get("parameters"));
    m.extensions(10, item);
}

fn write_operation(m: &mut W, op: &Map<String, Value>) {
    m.strings(1, op.get("tags"));
    m.str_field(2, op, "summary");
    m.str_field(3, op, "description");
    m.str_field(5, op, "operationId");
    m.strings(6, op.get("produces"));
    m.strings(7, op.get("consumes"));
    write_parameters_items(m, 8, op.get("parameters"));
    if let Some(rs) = op.get("responses").and_then(obj) {
        m.message(9, |r| write_responses(r, rs));
    }
    m.strings(10, op.get("schemes"));
    m.bool_field(11, op, "deprecated");
    if let Some(Value::Array(reqs)) = op.get("security") {
        for r in reqs.iter().filter_map(obj) {
            m.message(12, |s| write_security_requirement(s, r));
        }
    }
    m.extensions(13, op);
}

/// `repeated ParametersItem`: `oneof { Parameter parameter = 1; JsonReference json_reference = 2 }`.
fn write_parameters_items(m: &mut W, field: u32, params: Option<&Value>) {
    let Some(Value::Array(params)) = params else {
        return;
    };
    for p in params.iter().filter_map(obj) {
        m.message(field, |item| {
            if p.contains_key("$ref") {
                item.message(2, |r| {
                    r.str_field(1, p, "$ref");
                    r.str_field(2, p, "description");
                });
            } else {
                item.message(1, |pm| write_parameter(pm, p));
            }
        });
    }
}

/// `Parameter`: `oneof { BodyParameter body_parameter = 1; NonBodyParameter non_body_parameter = 2 }`.
fn write_parameter(m: &mut W, p: &Map<String, Value>) {
    let location = p.get("in").and_then(Value::as_str).unwrap_or_default();
    if location == "body" {
        m.message(1, |b| {
            b.str_field(1, p, "description");
            b.str_field(2, p, "name");
            b.str_field(3, p, "in");
            b.bool_field(4, p, "required");
            if let Some(s) = p.get("schema").and_then(obj) {
                b.message(5, |sm| write_schema(sm, s));
            }
            b.extensions(6, p);
        });
        return;
    }
    // NonBodyParameter: oneof header = 1, form_data = 2, query = 3, path = 4. The query
    // and formData sub-schemas have `allow_empty_value = 5` and their validation fields
    // from 6; header and path start those at 5.
    let (which, first) = match location {
        "header" => (1, 5),
        "formData" => (2, 6),
        "query" => (3, 6),
        _ => (4, 5),
    };
    m.message(2, |nb| {
        nb.message(which, |s| {
            s.bool_field(1, p, "required");
            s.str_field(2, p, "in");
            s.str_field(3, p, "description");
            s.str_field(4, p, "name");
            if first == 6 {
                s.bool_field(5, p, "allowEmptyValue");
            }
            write_primitive_fields(s, first, p);
        });
    });
}

/// The validation fields shared by the non-body parameter sub-schemas and
/// `PrimitivesItems`, numbered from `first` in this order, then the vendor extensions.
fn write_primitive_fields(m: &mut W, first: u32, p: &Map<String, Value>) {
    m.str_field(first, p, "type");
    m.str_field(first + 1, p, "format");
    if let Some(items) = p.get("items").and_then(obj) {
        m.message(first + 2, |i| write_primitive_fields(i, 1, items));
    }
    m.str_field(first + 3, p, "collectionFormat");
    m.any_field(first + 4, p, "default");
    m.double_field(first + 5, p, "maximum");
    m.bool_field(first + 6, p, "exclusiveMaximum");
    m.double_field(first + 7, p, "minimum");
    m.bool_field(first + 8, p, "exclusiveMinimum");
    m.int_field(first + 9, p, "maxLength");
    m.int_field(first + 10, p, "minLength");
    m.str_field(first + 11, p, "pattern");
    m.int_field(first + 12, p, "maxItems");
    m.int_field(first + 13, p, "minItems");
    m.bool_field(first + 14, p, "uniqueItems");
    m.anys(first + 15, p.get("enum"));
    m.double_field(first + 16, p, "multipleOf");
    m.extensions(first + 17, p);
}

/// `Responses { repeated NamedResponseValue response_code = 1; repeated NamedAny vendor_extension = 2 }`.
fn write_responses(m: &mut W, rs: &Map<String, Value>) {
    for (code, r) in rs {
        if code.starts_with("x-") {
            continue;
        }
        let Some(r) = obj(r) else { continue };
        m.message(1, |n| {
            n.string(1, code);
            // ResponseValue: oneof { Response response = 1; JsonReference json_reference = 2 }
            n.message(2, |rv| {
                if r.contains_key("$ref") {
                    rv.message(2, |j| {
                        j.str_field(1, r, "$ref");
                        j.str_field(2, r, "description");
                    });
                } else {
                    rv.message(1, |resp| write_response(resp, r));
                }
            });
        });
    }
    m.extensions(2, rs);
}

fn write_response(m: &mut W, r: &Map<String, Value>) {
    m.str_field(1, r, "description");
    if let Some(s) = r.get("schema").and_then(obj) {
        // SchemaItem: oneof { Schema schema = 1; FileSchema file_schema = 2 }
        m.message(2, |si| {
            if s.get("type").and_then(Value::as_str) == Some("file") {
                si.message(2, |f| {
                    f.str_field(1, s, "format");
                    f.str_field(2, s, "title");
                    f.str_field(3, s, "description");
                    f.any_field(4, s, "default");
                    f.strings(5, s.get("required"));
                    f.str_field(6, s, "type");
                    f.bool_field(7, s, "readOnly");
                    f.any_field(9, s, "example");
                    f.extensions(10, s);
                });
            } else {
                si.message(1, |sm| write_schema(sm, s));
            }
        });
    }
    m.extensions(5, r);
}

/// `repeated NamedSchema { string name = 1; Schema value = 2 }` as field 1.
fn write_named_schemas(m: &mut W, schemas: &Map<String, Value>) {
    for (name, s) in schemas {
        m.message(1, |n| {
            n.string(1, name);
            if let Some(s) = obj(s) {
                n.message(2, |sm| write_schema(sm, s));
            }
        });
    }
}

fn write_schema(m: &mut W, s: &Map<String, Value>) {
    m.str_field(1, s, "$ref");
    m.str_field(2, s, "format");
    m.str_field(3, s, "title");
    m.str_field(4, s, "description");
    m.any_field(5, s, "default");
    m.double_field(6, s, "multipleOf");
    m.double_field(7, s, "maximum");
    m.bool_field(8, s, "exclusiveMaximum");
    m.double_field(9, s, "minimum");
    m.bool_field(10, s, "exclusiveMinimum");
    m.int_field(11, s, "maxLength");
    m.int_field(12, s, "minLength");
    m.str_field(13, s, "pattern");
    m.int_field(14, s, "maxItems");
    m.int_field(15, s, "minItems");
    m.bool_field(16, s, "uniqueItems");
    m.int_field(17, s, "maxProperties");
    m.int_field(18, s, "minProperties");
    m.strings(19, s.get("required"));
    m.anys(20, s.get("enum"));
    match s.get("additionalProperties") {
        // AdditionalPropertiesItem: oneof { Schema schema = 1; bool boolean = 2 }
        Some(Value::Object(a)) => m.message(21, |ap| ap.message(1, |sm| write_schema(sm, a))),
        Some(Value::Bool(b)) => m.message(21, |ap| ap.bool_always(2, *b)),
        _ => {}
    }
    if let Some(t) = s.get("type") {
        // TypeItem { repeated string value = 1 }
        m.message(22, |ti| ti.strings(1, Some(t)));
    }
    match s.get("items") {
        // ItemsItem { repeated Schema schema = 1 }
        Some(Value::Object(i)) => m.message(23, |ii| ii.message(1, |sm| write_schema(sm, i))),
        Some(Value::Array(a)) => m.message(23, |ii| {
            for i in a.iter().filter_map(obj) {
                ii.message(1, |sm| write_schema(sm, i));
            }
        }),
        _ => {}
    }
    if let Some(Value::Array(all)) = s.get("allOf") {
        for a in all.iter().filter_map(obj) {
            m.message(24, |sm| write_schema(sm, a));
        }
    }
    if let Some(props) = s.get("properties").and_then(obj) {
        // Properties { repeated NamedSchema additional_properties = 1 }
        m.message(25, |p| write_named_schemas(p, props));
    }
    m.str_field(26, s, "discriminator");
    m.bool_field(27, s, "readOnly");
    if let Some(docs) = s.get("externalDocs").and_then(obj) {
        m.message(29, |e| {
            e.str_field(1, docs, "description");
            e.str_field(2, docs, "url");
            e.extensions(3, docs);
        });
    }
    m.any_field(30, s, "example");
    m.extensions(31, s);
}
