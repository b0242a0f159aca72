//! Upstream's `TestValidationExpressions` (apiextensions-apiserver
//! `pkg/apiserver/schema/cel/validation_test.go`): each rule is put on the
//! root schema and must pass, or fail with an error containing the text.

use berth_cel::validate;
use serde_json::{Value, json};

struct Case {
    name: &'static str,
    schema: Value,
    obj: Value,
    valid: &'static [&'static str],
    errors: &'static [(&'static str, &'static str)],
}

fn objs(vals: &[Value]) -> Value {
    let mut m = serde_json::Map::new();
    for (i, v) in vals.iter().enumerate() {
        m.insert(format!("val{}", i + 1), v.clone());
    }
    Value::Object(m)
}

fn schemas(types: &[Value]) -> Value {
    let mut m = serde_json::Map::new();
    for (i, t) in types.iter().enumerate() {
        m.insert(format!("val{}", i + 1), t.clone());
    }
    json!({"type": "object", "properties": m})
}

fn object(props: Value) -> Value {
    json!({"type": "object", "properties": props})
}

fn with_rule(schema: &Value, rule: &str) -> Value {
    let mut s = schema.clone();
    s["x-kubernetes-validations"] = json!([{"rule": rule}]);
    s
}

/// Upstream's `ValsEqualThemselvesAndDataLiteral`.
fn vals_equal(a: &str, b: &str, lit: &str) -> Vec<String> {
    vec![
        format!("{a} == {b}"),
        format!("{a} == {lit}"),
        format!("{lit} == {a}"),
        format!("{b} == {lit}"),
        format!("{lit} == {b}"),
        format!("{a} == {b} && {b} == {lit}"),
    ]
}

fn run(cases: &[Case], extra_valid: &[(&str, Vec<String>)]) {
    let mut failures = Vec::new();
    for c in cases {
        let mut valid: Vec<String> = c.valid.iter().map(|s| s.to_string()).collect();
        for (name, v) in extra_valid {
            if *name == c.name {
                valid.extend(v.iter().cloned());
            }
        }
        for rule in &valid {
            let errs = validate(&with_rule(&c.schema, rule), &c.obj, None, "");
            if !errs.is_empty() {
                failures.push(format!(
                    "[{}] {rule}: expected valid, got {:?}",
                    c.name,
                    errs.iter().map(|e| e.to_string()).collect::<Vec<_>>()
                ));
            }
        }
        for (rule, want) in c.errors {
            let errs = validate(&with_rule(&c.schema, rule), &c.obj, None, "");
            if !errs.iter().any(|e| e.to_string().contains(want)) {
                failures.push(format!(
                    "[{}] {rule}: expected error containing {want:?}, got {:?}",
                    c.name,
                    errs.iter().map(|e| e.to_string()).collect::<Vec<_>>()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn validation_expressions() {
    let int = json!({"type": "integer"});
    let int32 = json!({"type": "integer", "format": "int32"});
    let int64 = json!({"type": "integer", "format": "int64"});
    let number = json!({"type": "number"});
    let double = json!({"type": "number", "format": "double"});
    let float = json!({"type": "number", "format": "float"});
    let string = json!({"type": "string"});
    let byte = json!({"type": "string", "format": "byte"});
    let boolean = json!({"type": "boolean"});
    let duration = json!({"type": "string", "format": "duration"});
    let date = json!({"type": "string", "format": "date"});
    let date_time = json!({"type": "string", "format": "date-time"});
    let list = |items: &Value| json!({"type": "array", "items": items});
    let list_set =
        |items: &Value| json!({"type": "array", "items": items, "x-kubernetes-list-type": "set"});
    let map_of = |v: &Value| json!({"type": "object", "additionalProperties": v});
    let int_or_string = json!({"x-kubernetes-int-or-string": true});
    let kv = object(json!({"k": string, "v": string}));

    let cases = vec![
        Case {
            name: "integers",
            obj: objs(&[
                json!(i64::MAX),
                json!(i64::MAX),
                json!(i32::MAX),
                json!(i32::MAX),
                json!(i64::MAX),
                json!(i64::MAX),
            ]),
            schema: schemas(&[
                int.clone(),
                int.clone(),
                int32.clone(),
                int32.clone(),
                int64.clone(),
                int64.clone(),
            ]),
            valid: &[
                "self.val1 == self.val6",
                "type(self.val1) == int",
                "self.val3 + 1 == 2147483647 + 1",
                "type(self.val3) == int",
                "type(self.val5) == int",
            ],
            errors: &[
                ("self.val1 + 1 == 0", "integer overflow"),
                ("self.val5 + 1 == 0", "integer overflow"),
                ("1 / 0 == 1 / 0", "division by zero"),
            ],
        },
        Case {
            name: "numbers",
            obj: objs(&[
                json!(f64::MAX),
                json!(f64::MAX),
                json!(f32::MAX as f64),
                json!(f32::MAX as f64),
                json!(f64::MAX),
                json!(f64::MAX),
                json!(1),
            ]),
            schema: schemas(&[
                number.clone(),
                number.clone(),
                float.clone(),
                float.clone(),
                double.clone(),
                double.clone(),
                double.clone(),
            ]),
            valid: &[
                "self.val1 == self.val6",
                "type(self.val1) == double",
                "type(self.val3) == double",
                "type(self.val5) == double",
                "type(self.val7) == double",
                "self.val7 == 1.0",
            ],
            errors: &[],
        },
        Case {
            name: "numeric comparisons",
            obj: objs(&[
                json!(5),
                json!(10),
                json!(15),
                json!(10.0),
                json!(10.0),
                json!(10.0),
                json!(10),
                json!(10),
                json!(10),
            ]),
            schema: schemas(&[
                int.clone(),
                int.clone(),
                int.clone(),
                number.clone(),
                float.clone(),
                double.clone(),
                number.clone(),
                float.clone(),
                double.clone(),
            ]),
            valid: &[
                "double(self.val1) < self.val4",
                "double(self.val1) <= self.val4",
                "double(self.val2) <= self.val4",
                "double(self.val2) == self.val4",
                "double(self.val2) >= self.val4",
                "double(self.val3) > self.val4",
                "double(self.val3) >= self.val4",
                "self.val1 < int(self.val4)",
                "self.val2 == int(self.val4)",
                "self.val3 > int(self.val4)",
                "double(self.val1) < self.val7",
                "double(self.val2) == self.val7",
                "double(self.val3) > self.val7",
                "self.val1 < int(self.val9)",
                "self.val2 == int(self.val9)",
                "self.val3 > int(self.val9)",
                "double(5) < 10.0",
                "double(10) == 10.0",
                "double(15) > 10.0",
                "5 < int(10.0)",
                "10 == int(10.0)",
                "15 > int(10.0)",
                "double(self.val1) < 10.0",
                "double(self.val2) == 10.0",
                "double(self.val3) > 10.0",
            ],
            errors: &[],
        },
        Case {
            name: "unicode strings",
            obj: objs(&[json!("Rook takes 👑"), json!("Rook takes 👑")]),
            schema: schemas(&[string.clone(), string.clone()]),
            valid: &[
                "self.val1.startsWith('Rook')",
                "!self.val1.startsWith('knight')",
                "self.val1.contains('takes')",
                "!self.val1.contains('gives')",
                "self.val1.endsWith('👑')",
                "!self.val1.endsWith('pawn')",
                "self.val1.matches('^[^0-9]*$')",
                "!self.val1.matches('^[0-9]*$')",
                "type(self.val1) == string",
                "size(self.val1) == 12",
                "self.val1.charAt(3) == 'k'",
                "self.val1.indexOf('o') == 1",
                "self.val1.indexOf('o', 2) == 2",
                "self.val1.replace(' ', 'x') == 'Rookxtakesx👑'",
                "self.val1.replace(' ', 'x', 1) == 'Rookxtakes 👑'",
                "self.val1.split(' ') == ['Rook', 'takes', '👑']",
                "self.val1.split(' ', 2) == ['Rook', 'takes 👑']",
                "self.val1.substring(5) == 'takes 👑'",
                "self.val1.substring(0, 4) == 'Rook'",
                "self.val1.substring(4, 10).trim() == 'takes'",
                "self.val1.upperAscii() == 'ROOK TAKES 👑'",
                "self.val1.lowerAscii() == 'rook takes 👑'",
            ],
            errors: &[(
                "self.val1.matches(')')",
                "compile error: program instantiation failed: error parsing regexp",
            )],
        },
        Case {
            name: "escaped strings",
            obj: objs(&[json!("l1\nl2"), json!("l1\nl2")]),
            schema: schemas(&[string.clone(), string.clone()]),
            valid: &[
                "self.val1 == self.val2",
                "self.val1 == 'l1\\nl2'",
                "self.val1 == '''l1\nl2'''",
            ],
            errors: &[],
        },
        Case {
            name: "bytes",
            obj: objs(&[json!("QUI="), json!("QUI=")]),
            schema: schemas(&[byte.clone(), byte.clone()]),
            valid: &[
                "self.val1 == self.val2",
                "self.val1 == b'AB'",
                "self.val1 == bytes('AB')",
                "self.val1 == b'\\x41\\x42'",
                "type(self.val1) == bytes",
                "size(self.val1) == 2",
            ],
            errors: &[],
        },
        Case {
            name: "booleans",
            obj: objs(&[json!(true), json!(true), json!(false), json!(false)]),
            schema: schemas(&[
                boolean.clone(),
                boolean.clone(),
                boolean.clone(),
                boolean.clone(),
            ]),
            valid: &["self.val1 != self.val4", "type(self.val1) == bool"],
            errors: &[],
        },
        Case {
            name: "duration format",
            obj: objs(&[json!("1h2m3s4ms"), json!("1h2m3s4ms")]),
            schema: schemas(&[duration.clone(), duration.clone()]),
            valid: &[
                "self.val1 == duration('1h2m') + duration('3s4ms')",
                "self.val1.getHours() == 1",
                "self.val1.getMinutes() == 62",
                "self.val1.getSeconds() == 3723",
                "self.val1.getMilliseconds() == 3723004",
                "type(self.val1) == google.protobuf.Duration",
            ],
            errors: &[],
        },
        Case {
            name: "date format",
            obj: objs(&[json!("1997-07-16"), json!("1997-07-16")]),
            schema: schemas(&[date.clone(), date.clone()]),
            valid: &[
                "self.val1.getDate() == 16",
                "self.val1.getMonth() == 06",
                "self.val1.getFullYear() == 1997",
                "type(self.val1) == google.protobuf.Timestamp",
            ],
            errors: &[],
        },
        Case {
            name: "date-time format",
            obj: objs(&[
                json!("2011-08-18T19:03:37.010000000+01:00"),
                json!("2011-08-18T19:03:37.010000000+01:00"),
            ]),
            schema: schemas(&[date_time.clone(), date_time.clone()]),
            valid: &[
                "self.val1 == timestamp('2011-08-18T00:00:00.000+01:00') + duration('19h3m37s10ms')",
                "self.val1.getDate('01:00') == 18",
                "self.val1.getMonth('01:00') == 7",
                "self.val1.getFullYear('01:00') == 2011",
                "self.val1.getHours('01:00') == 19",
                "self.val1.getMinutes('01:00') == 03",
                "self.val1.getSeconds('01:00') == 37",
                "self.val1.getMilliseconds('01:00') == 10",
                "self.val1.getHours('UTC') == 18",
                "type(self.val1) == google.protobuf.Timestamp",
            ],
            errors: &[],
        },
        Case {
            name: "enums",
            obj: json!({"enumStr": "Pending"}),
            schema: object(
                json!({"enumStr": {"type": "string", "enum": ["Pending", "Available", "Bound", "Released", "Failed"]}}),
            ),
            valid: &[
                "self.enumStr == 'Pending'",
                "self.enumStr in ['Pending', 'Available']",
            ],
            errors: &[],
        },
        Case {
            name: "conversions",
            obj: objs(&[
                json!(10),
                json!(10.0),
                json!(10.49),
                json!(10.5),
                json!(true),
                json!("10"),
                json!("MTA="),
                json!("3723.004s"),
                json!("1h2m3s4ms"),
                json!("2011-08-18T19:03:37.01+01:00"),
                json!("2011-08-18T19:03:37.01+01:00"),
                json!("2011-08-18T00:00:00Z"),
                json!("2011-08-18"),
            ]),
            schema: schemas(&[
                int.clone(),
                number.clone(),
                number.clone(),
                number.clone(),
                boolean.clone(),
                string.clone(),
                byte.clone(),
                string.clone(),
                duration.clone(),
                string.clone(),
                date_time.clone(),
                string.clone(),
                date.clone(),
            ]),
            valid: &[
                "int(self.val2) == self.val1",
                "int(self.val3) == self.val1",
                "int(self.val4) == self.val1",
                "int(self.val6) == self.val1",
                "double(self.val1) == self.val2",
                "double(self.val6) == self.val2",
                "bytes(self.val6) == self.val7",
                "string(self.val1) == self.val6",
                "string(self.val2) == '10'",
                "string(self.val3) == '10.49'",
                "string(self.val4) == '10.5'",
                "string(self.val5) == 'true'",
                "string(self.val7) == self.val6",
                "duration(self.val8) == self.val9",
                "string(self.val9) == self.val8",
                "timestamp(self.val10) == self.val11",
                "string(self.val11) == self.val10",
                "timestamp(self.val12) == self.val13",
                "string(self.val13) == self.val12",
            ],
            errors: &[],
        },
        Case {
            name: "lists",
            obj: objs(&[json!([1, 2, 3]), json!([1, 2, 3])]),
            schema: schemas(&[list(&int), list(&int)]),
            valid: &[
                "1 in self.val1",
                "self.val2[0] in self.val1",
                "!(0 in self.val1)",
                "self.val1 + self.val2 == [1, 2, 3, 1, 2, 3]",
                "self.val1 + [4, 5] == [1, 2, 3, 4, 5]",
            ],
            errors: &[],
        },
        Case {
            name: "listSets",
            obj: objs(&[json!(["a", "b", "c"]), json!(["a", "c", "b"])]),
            schema: schemas(&[list_set(&string), list_set(&string)]),
            valid: &[
                "self.val1 == ['c', 'b', 'a']",
                "self.val1 == self.val2",
                "'a' in self.val1",
                "self.val2[0] in self.val1",
                "!('x' in self.val1)",
                "self.val1 + self.val2 == ['a', 'b', 'c']",
                "self.val1 + ['c', 'd'] == ['a', 'b', 'c', 'd']",
            ],
            errors: &[],
        },
        Case {
            name: "listMaps",
            obj: json!({"objs": [
                [{"k": "a", "v": "1"}, {"k": "b", "v": "2"}],
                [{"k": "b", "v": "2"}, {"k": "a", "v": "1"}],
                [{"k": "b", "v": "3"}, {"k": "a", "v": "1"}],
                [{"k": "c", "v": "4"}],
            ]}),
            schema: object(json!({"objs": {"type": "array", "items": {
                "type": "array", "items": kv, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"]}}})),
            valid: &[
                "self.objs[0] == self.objs[1]",
                "self.objs[0] + self.objs[2] == self.objs[2]",
                "self.objs[2] + self.objs[0] == self.objs[0]",
                "self.objs[0] == [self.objs[0][0], self.objs[0][1]]",
                "self.objs[0] == [self.objs[0][1], self.objs[0][0]]",
                "self.objs[2] + [self.objs[0][0], self.objs[0][1]] == self.objs[0]",
                "size(self.objs[0] + [self.objs[3][0]]) == 3",
            ],
            errors: &[(
                "self.objs[0] == {'k': 'a', 'v': '1'}",
                "no matching overload for '_==_'",
            )],
        },
        Case {
            name: "maps",
            obj: objs(&[json!({"k1": "a", "k2": "b"}), json!({"k2": "b", "k1": "a"})]),
            schema: schemas(&[map_of(&string), map_of(&string)]),
            valid: &[
                "self.val1 == self.val2",
                "'k1' in self.val1",
                "!('k3' in self.val1)",
                "self.val1 == {'k1': 'a', 'k2': 'b'}",
            ],
            errors: &[],
        },
        Case {
            name: "objects",
            obj: json!({"objs": [{"f1": "a", "f2": "b"}, {"f1": "a", "f2": "b"}]}),
            schema: object(json!({"objs": list(&object(json!({"f1": string, "f2": string})))})),
            valid: &["self.objs[0] == self.objs[1]"],
            errors: &[(
                "self.objs[0] == {'f1': 'a', 'f2': 'b'}",
                "found no matching overload for '_==_'",
            )],
        },
        Case {
            name: "object access",
            obj: json!({"a": {"b": 1, "d": null}, "a1": {"b1": {"c1": 4}}, "a3": {}}),
            schema: object(json!({
                "a": object(json!({"b": int, "c": int, "d": {"type": "integer", "nullable": true}})),
                "a1": object(json!({"b1": object(json!({"c1": int})), "d2": object(json!({"e2": int}))})),
            })),
            valid: &[
                "has(self.a.b)",
                "!has(self.a.c)",
                "!has(self.a.d)",
                "has(self.a1.b1.c1)",
                "!(has(self.a1.d2) && has(self.a1.d2.e2))",
                "!has(self.a1.d2)",
            ],
            errors: &[
                ("has(self.a.z)", "undefined field 'z'"),
                ("self.a['b'] == 1", "no matching overload for '_[_]'"),
                ("has(self.a1.d2.e2)", "no such key: d2"),
            ],
        },
        Case {
            name: "map access",
            obj: json!({"val": {"b": 1, "d": 2}}),
            schema: object(json!({"val": map_of(&int)})),
            valid: &[
                "!('a' in self.val)",
                "'b' in self.val",
                "!('c' in self.val)",
                "'d' in self.val",
                "!has(self.val.a)",
                "has(self.val.b)",
                "!has(self.val.c)",
                "has(self.val.d)",
                "self.val.all(k, self.val[k] > 0)",
                "self.val.exists(k, self.val[k] > 1)",
                "self.val.exists_one(k, self.val[k] == 2)",
                "!self.val.exists(k, self.val[k] > 2)",
                "!self.val.exists_one(k, self.val[k] > 0)",
                "size(self.val) == 2",
                "self.val.map(k, self.val[k]).exists(v, v == 1)",
                "size(self.val.filter(k, self.val[k] > 1)) == 1",
            ],
            errors: &[("self.val['c'] == 1", "no such key: c")],
        },
        Case {
            name: "listMap access",
            obj: json!({"listMap": [{"k": "a1", "v": "b1"}, {"k": "a2", "v": "b2"}, {"k": "a3", "v": "b3", "v2": "z"}]}),
            schema: object(
                json!({"listMap": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                "items": object(json!({"k": string, "v": string, "v2": string}))}}),
            ),
            valid: &[
                "has(self.listMap[0].v)",
                "self.listMap.all(m, m.k.startsWith('a'))",
                "self.listMap.all(m, !has(m.v2) || m.v2 == 'z')",
                "self.listMap.exists(m, m.k.endsWith('1'))",
                "self.listMap.exists_one(m, m.k == 'a3')",
                "!self.listMap.all(m, m.k.endsWith('1'))",
                "!self.listMap.exists(m, m.v == 'x')",
                "!self.listMap.exists_one(m, m.k.startsWith('a'))",
                "size(self.listMap.filter(m, m.k == 'a1')) == 1",
                "self.listMap.exists(m, m.k == 'a1' && m.v == 'b1')",
                "self.listMap.map(m, m.v).exists(v, v == 'b1')",
                "self.listMap.exists(m, has(m.v2) && m.v2 == 'z')",
                "!self.listMap.all(m, has(m.v2) && m.v2 != 'z')",
                "self.listMap.exists_one(m, has(m.v2) && m.v2 == 'z')",
                "self.listMap.filter(m, has(m.v2) && m.v2 == 'z').size() == 1",
                "self.listMap.map(m, has(m.v2) && m.v2 == 'z', m.v2).size() == 1",
                "self.listMap.filter(m, has(m.v2) && m.v2 == 'z').map(m, m.v2).size() == 1",
                "self.listMap.exists(m, m.v2 == 'z')",
                "!self.listMap.all(m, m.v2 != 'z')",
            ],
            errors: &[
                ("self.listMap.all(m, m.v2 == 'z')", "no such key: v2"),
                ("self.listMap.exists_one(m, m.v2 == 'z')", "no such key: v2"),
                (
                    "self.listMap.filter(m, m.v2 == 'z').size() == 1",
                    "no such key: v2",
                ),
                ("self.listMap.map(m, m.v2).size() == 1", "no such key: v2"),
                (
                    "self.listMap.map(m, m.v2 == 'z', m.v2).size() == 1",
                    "no such key: v2",
                ),
            ],
        },
        Case {
            name: "list access",
            obj: json!({"array": [1, 1, 2, 2, 3, 3, 4, 5]}),
            schema: object(json!({"array": list(&int)})),
            valid: &[
                "2 in self.array",
                "self.array.all(e, e > 0)",
                "self.array.exists(e, e > 2)",
                "self.array.exists_one(e, e > 4)",
                "!self.array.all(e, e < 2)",
                "!self.array.exists(e, e < 0)",
                "!self.array.exists_one(e, e == 2)",
                "self.array.all(e, e < 100)",
                "size(self.array.filter(e, e%2 == 0)) == 3",
                "self.array.map(e, e * 20).filter(e, e > 50).exists(e, e == 60)",
                "size(self.array) == 8",
            ],
            errors: &[("self.array[100] == 0", "index out of bounds: 100")],
        },
        Case {
            name: "typemeta and objectmeta access specified",
            obj: json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "foo", "generateName": "pickItForMe", "namespace": "xyz"}}),
            schema: object(
                json!({"kind": string, "apiVersion": string, "metadata": object(json!({"name": string, "generateName": string}))}),
            ),
            valid: &[
                "self.kind == 'Pod'",
                "self.apiVersion == 'v1'",
                "self.metadata.name == 'foo'",
                "self.metadata.generateName == 'pickItForMe'",
            ],
            errors: &[(
                "has(self.metadata.namespace)",
                "undefined field 'namespace'",
            )],
        },
        Case {
            name: "embedded object",
            obj: json!({"embedded": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "foo", "generateName": "pickItForMe", "namespace": "xyz"}, "spec": {"field1": "a"}}}),
            schema: object(
                json!({"embedded": {"type": "object", "x-kubernetes-embedded-resource": true}}),
            ),
            valid: &[
                "self.embedded.kind == 'Pod'",
                "self.embedded.apiVersion == 'v1'",
                "self.embedded.metadata.name == 'foo'",
                "self.embedded.metadata.generateName == 'pickItForMe'",
            ],
            errors: &[
                (
                    "has(self.embedded.metadata.namespace)",
                    "undefined field 'namespace'",
                ),
                ("has(self.embedded.spec)", "undefined field 'spec'"),
            ],
        },
        Case {
            name: "string in intOrString",
            obj: json!({"something": "25%"}),
            schema: object(json!({"something": int_or_string})),
            valid: &[
                "self.something == '25%'",
                "self.something != 1",
                "self.something == 1 || self.something == '25%'",
                "self.something == '25%' || self.something == 1",
                "type(self.something) == string && self.something == '25%'",
                "type(self.something) == int ? self.something == 1 : self.something == '25%'",
                "self.something != ['anything']",
            ],
            errors: &[],
        },
        Case {
            name: "int in intOrString",
            obj: json!({"something": 1}),
            schema: object(json!({"something": int_or_string})),
            valid: &[
                "self.something == 1",
                "self.something != 'some string'",
                "self.something == 1 || self.something == '25%'",
                "type(self.something) == int && self.something == 1",
                "type(self.something) == int ? self.something == 1 : self.something == '25%'",
            ],
            errors: &[],
        },
        Case {
            name: "null in intOrString",
            obj: json!({"something": null}),
            schema: object(
                json!({"something": {"x-kubernetes-int-or-string": true, "nullable": true}}),
            ),
            valid: &["!has(self.something)"],
            errors: &[("type(self.something) == int", "no such key")],
        },
        Case {
            name: "percent comparison using intOrString",
            obj: json!({"min": "50%", "current": 5, "available": 10}),
            schema: object(json!({"min": int_or_string, "current": int, "available": int})),
            valid: &[
                r"type(self.min) == string && self.min.matches(r'(\d+(\.\d+)?%)')",
                "type(self.min) == int ? self.current <= self.min : double(self.current) / double(self.available) >= double(self.min.replace('%', '')) / 100.0",
            ],
            errors: &[],
        },
        Case {
            name: "preserve unknown fields",
            obj: json!({
                "withUnknown": {"field1": "a", "field2": "b"},
                "withUnknownList": [{"field1": "a", "field2": "b"}, {"field1": "x", "field2": "y"}, {"field1": "x", "field2": "y"}, {}, {}],
                "anyvalField1": 1,
            }),
            schema: object(json!({
                "withUnknown": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "withUnknownList": list(&json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})),
                "anyvalList": list(&json!({"x-kubernetes-preserve-unknown-fields": true})),
                "anyvalField1": {"x-kubernetes-preserve-unknown-fields": true},
            })),
            valid: &[
                "has(self.withUnknown)",
                "self.withUnknownList.size() == 5",
                "self.withUnknownList[0] != self.withUnknownList[1]",
                "self.withUnknownList[1] == self.withUnknownList[2]",
                "self.withUnknownList[3] == self.withUnknownList[4]",
            ],
            errors: &[
                ("has(self.withUnknown.field1)", "undefined field 'field1'"),
                ("has(self.anyvalList)", "undefined field 'anyvalList'"),
                ("has(self.anyvalField1)", "undefined field 'anyvalField1'"),
            ],
        },
        Case {
            name: "field nullability",
            obj: json!({"setPlainStr": "v1", "setNullableStr": "v3", "setToNullNullableStr": null}),
            schema: object(json!({
                "unsetPlainStr": string,
                "unsetNullableStr": {"type": "string", "nullable": true},
                "setPlainStr": string,
                "setNullableStr": {"type": "string", "nullable": true},
                "setToNullNullableStr": {"type": "string", "nullable": true},
            })),
            valid: &[
                "!has(self.unsetPlainStr)",
                "!has(self.unsetNullableStr)",
                "has(self.setPlainStr) && self.setPlainStr == 'v1'",
                "has(self.setNullableStr) && self.setNullableStr == 'v3'",
                "type(self.setNullableStr) != null_type",
                "!has(self.setToNullNullableStr)",
            ],
            errors: &[
                (
                    "self.unsetPlainStr == null",
                    "no matching overload for '_==_' applied to '(string, null)",
                ),
                (
                    "self.setPlainStr != null",
                    "no matching overload for '_!=_' applied to '(string, null)",
                ),
            ],
        },
        Case {
            name: "null values in container types",
            obj: json!({"m": {"a": null, "b": "not-nil"}, "l": [null, "not-nil"]}),
            schema: object(json!({
                "m": map_of(&json!({"type": "string", "nullable": true})),
                "l": list(&json!({"type": "string", "nullable": true})),
            })),
            valid: &[
                "self.m.size() == 2",
                "'a' in self.m",
                "type(self.m['a']) == null_type",
                "self.l.size() == 2",
                "type(self.l[0]) == null_type",
            ],
            errors: &[],
        },
        Case {
            name: "escaping",
            obj: json!({"true": 1, "namespace": 17, "int": 101, "self": 201, "getDate": 202, "all": 203, "size": "204",
                "_true": 301, "dot.dot": 401, "dash-dash": 402, "slash/slash": 403, "underscore_underscore": 404,
                "doubleunderscore__doubleunderscore": 405}),
            schema: object(
                json!({"true": int, "namespace": int, "int": int, "self": int, "getDate": int, "all": int, "size": string,
                "_true": int, "dot.dot": int, "dash-dash": int, "slash/slash": int, "underscore_underscore": int,
                "doubleunderscore__doubleunderscore": int}),
            ),
            valid: &[
                "self.__true__ == 1",
                "self.__namespace__ == 17",
                "self.int == 101",
                "self.self == 201",
                "self.getDate == 202",
                "self.all == 203",
                "self.size == '204'",
                "self._true == 301",
                "self.__true__ != 301",
                "self.dot__dot__dot == 401",
                "self.dash__dash__dash == 402",
                "self.slash__slash__slash == 403",
                "self.underscore_underscore == 404",
                "self.doubleunderscore__underscores__doubleunderscore == 405",
            ],
            errors: &[
                // cel-go: "mismatched input 'true' expecting IDENTIFIER"; the antlr
                // runtime of the `cel` crate words it differently.
                ("self.true == 1", "Syntax error: "),
                ("self == 201", "found no matching overload for '_==_'"),
                ("self.__illegal__ == 301", "undefined field '__illegal__'"),
            ],
        },
        Case {
            name: "map keys are not escaped",
            obj: json!({"m": {"@": 1, "9": 2, "int": 3, "./-": 4, "👑": 5}}),
            schema: object(json!({"m": map_of(&int)})),
            valid: &[
                "self.m['@'] == 1",
                "self.m['9'] == 2",
                "self.m['int'] == 3",
                "self.m['./-'] == 4",
                "self.m['👑'] == 5",
            ],
            errors: &[],
        },
        Case {
            name: "object types are not accessible",
            obj: json!({"nestedInMap": {"k1": {"inMapField": 1}, "k2": {"inMapField": 2}}, "nestedInList": [{"inListField": 1}, {"inListField": 2}]}),
            schema: object(json!({
                "nestedInMap": map_of(&object(json!({"inMapField": int}))),
                "nestedInList": list(&object(json!({"inListField": int}))),
            })),
            valid: &[
                "type(self) == type(self)",
                "type(self.nestedInMap['k1']) == type(self.nestedInMap['k2'])",
                "type(self.nestedInList[0]) == type(self.nestedInList[1])",
            ],
            errors: &[(
                "string(type(self.nestedInList[0])).endsWith('.nestedInList.@idx')",
                "found no matching overload for 'string' applied to '(type",
            )],
        },
    ];
    let generated = vec![
        (
            "integers",
            [
                vals_equal("self.val1", "self.val2", &i64::MAX.to_string()),
                vals_equal("self.val3", "self.val4", &i32::MAX.to_string()),
            ]
            .concat(),
        ),
        (
            "unicode strings",
            vals_equal("self.val1", "self.val2", "'Rook takes 👑'"),
        ),
        (
            "booleans",
            [
                vals_equal("self.val1", "self.val2", "true"),
                vals_equal("self.val3", "self.val4", "false"),
            ]
            .concat(),
        ),
        (
            "duration format",
            vals_equal("self.val1", "self.val2", "duration('1h2m3s4ms')"),
        ),
        (
            "date format",
            vals_equal(
                "self.val1",
                "self.val2",
                "timestamp('1997-07-16T00:00:00.000Z')",
            ),
        ),
        (
            "date-time format",
            vals_equal(
                "self.val1",
                "self.val2",
                "timestamp('2011-08-18T19:03:37.010+01:00')",
            ),
        ),
        ("lists", vals_equal("self.val1", "self.val2", "[1, 2, 3]")),
    ];
    run(&cases, &generated);
}
