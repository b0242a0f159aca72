//! The Kubernetes CEL libraries (lists, regex, strings, url, quantity, ip,
//! cidr, format, sets) and robustness against hostile input.

use berth_cel::{Activation, Env, EvalValue, compile};

fn eval(expr: &str) -> Result<EvalValue, String> {
    let env = Env::new();
    let p = compile(expr, &env).map_err(|e| e.to_string())?;
    p.eval(&Activation::new()).map_err(|e| e.to_string())
}

#[test]
fn library_functions_are_true() {
    let cases = [
        // lists
        "[1, 2, 3].isSorted()",
        "![3, 1].isSorted()",
        "[1, 2, 3].sum() == 6",
        "[1.5, 2.5].sum() == 4.0",
        "[].sum() == 0",
        "[3, 1, 2].min() == 1",
        "[3, 1, 2].max() == 3",
        "[1, 2, 2, 3].indexOf(2) == 1",
        "[1, 2, 2, 3].lastIndexOf(2) == 2",
        "[1, 2].indexOf(9) == -1",
        "['a', 'b'].join() == 'ab'",
        "['a', 'b'].join('-') == 'a-b'",
        // regex
        "'abc 123'.find('[0-9]+') == '123'",
        "'abc'.find('[0-9]+') == ''",
        "'1 2 3'.findAll('[0-9]') == ['1', '2', '3']",
        "'1 2 3'.findAll('[0-9]', 2) == ['1', '2']",
        "'kubernetes'.matches('^k8?[a-z]+$')",
        // strings
        "'Hello'.lowerAscii() == 'hello'",
        "'  x '.trim() == 'x'",
        "'abc'.reverse() == 'cba'",
        "'a,b,c'.split(',') == ['a', 'b', 'c']",
        "'hello'.lastIndexOf('l') == 3",
        "'%s is %d'.format(['x', dyn(3)]) == 'x is 3'",
        "strings.quote('a\"b') == '\"a\\\\\"b\"'",
        // url
        "url('https://example.com:8080/path?a=1&a=2').getScheme() == 'https'",
        "url('https://example.com:8080/path').getHost() == 'example.com:8080'",
        "url('https://example.com:8080/path').getHostname() == 'example.com'",
        "url('https://example.com:8080/path').getPort() == '8080'",
        "url('https://[::1]:80/').getHostname() == '::1'",
        "url('https://example.com/a%20b').getEscapedPath() == '/a%20b'",
        "url('https://example.com/?a=1&a=2&b=x').getQuery() == {'a': ['1', '2'], 'b': ['x']}",
        "url('/absolute/path').getScheme() == ''",
        "isURL('https://example.com')",
        "!isURL('relative/path')",
        // quantity
        "quantity('1Gi').isGreaterThan(quantity('1G'))",
        "quantity('500m').isLessThan(quantity('1'))",
        "quantity('1000m') == quantity('1')",
        "quantity('1k').compareTo(quantity('1000')) == 0",
        "quantity('2').asInteger() == 2",
        "!quantity('1.5').isInteger()",
        "quantity('1.5').asApproximateFloat() == 1.5",
        "quantity('1').add(quantity('500m')) == quantity('1500m')",
        "quantity('1').add(2) == quantity('3')",
        "quantity('1').sub(1).sign() == 0",
        "quantity('-1').sign() == -1",
        "isQuantity('10Mi')",
        "!isQuantity('10 Mi')",
        // ip / cidr
        "ip('192.168.0.1').family() == 4",
        "ip('::1').family() == 6",
        "ip('127.0.0.1').isLoopback()",
        "ip('0.0.0.0').isUnspecified()",
        "ip('169.254.1.1').isLinkLocalUnicast()",
        "ip('224.0.0.1').isLinkLocalMulticast()",
        "ip('8.8.8.8').isGlobalUnicast()",
        "isIP('10.0.0.1')",
        "!isIP('10.0.0.256')",
        "!isIP('::ffff:10.0.0.1')",
        "ip.isCanonical('2001:db8::1')",
        "!ip.isCanonical('2001:DB8::1')",
        "string(ip('10.0.0.1')) == '10.0.0.1'",
        "cidr('10.0.0.0/8').containsIP('10.1.2.3')",
        "cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))",
        "!cidr('10.0.0.0/8').containsIP('11.0.0.1')",
        "cidr('10.0.0.0/8').containsCIDR('10.1.0.0/16')",
        "!cidr('10.1.0.0/16').containsCIDR('10.0.0.0/8')",
        "cidr('10.1.2.3/8').masked() == cidr('10.0.0.0/8')",
        "cidr('10.0.0.0/8').prefixLength() == 8",
        "cidr('10.1.2.3/8').ip() == ip('10.1.2.3')",
        "string(cidr('fd00::/64')) == 'fd00::/64'",
        "isCIDR('10.0.0.0/8')",
        "!isCIDR('10.0.0.0/33')",
        // format
        "!format.dns1123Label().validate('my-name').hasValue()",
        "format.dns1123Label().validate('My_Name').hasValue()",
        "format.named('dns1123Subdomain').hasValue()",
        "!format.named('bogus').hasValue()",
        "format.named('labelValue').value().validate('ok').orValue([]) == []",
        "!format.uuid().validate('123e4567-e89b-12d3-a456-426614174000').hasValue()",
        // sets
        "sets.contains([1, 2, 3], [3, 1])",
        "sets.equivalent([1, 2], [2, 1, 1])",
        "sets.intersects([1, 2], [2, 5])",
        // optionals
        "optional.of(1).value() == 1",
        "optional.none().orValue(5) == 5",
        "{'a': 1}.?a.orValue(0) == 1",
        "{'a': 1}.?b.orValue(0) == 0",
        "[1, 2][?5].orValue(0) == 0",
        // standard library
        "timestamp('2024-01-01T00:00:00Z') + duration('24h') == timestamp('2024-01-02T00:00:00Z')",
        "timestamp('2024-01-02T00:00:00Z') - timestamp('2024-01-01T00:00:00Z') == duration('24h')",
        "duration('1h') > duration('59m')",
        "string(duration('90s')) == '90s'",
        "int('42') == 42",
        "uint(42) == 42u",
        "dyn(1) == 1u && dyn(1) == 1.0 && 2u < 3.5",
        "[1, 2].all(x, x > 0) && [1, 2].exists_one(x, x == 2)",
        "{'a': 1, 'b': 2}.all(k, k.size() == 1)",
        "type(1) == int && type('') == string && type([]) == list",
        "true || 1 / 0 == 1",
        "1 / 0 == 1 || true",
        "!(false && 1 / 0 == 1)",
    ];
    let mut failures = Vec::new();
    for c in cases {
        match eval(c) {
            Ok(EvalValue::Bool(true)) => {}
            other => failures.push(format!("{c}: {other:?}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn library_errors() {
    let cases = [
        (
            "quantity('1.5').asInteger()",
            "cannot convert value to integer",
        ),
        ("ip('::ffff:1.2.3.4')", "IPv4-mapped IPv6 address"),
        ("[].min()", "min called on empty list"),
        ("'abc'.substring(5)", "index out of range: 5"),
        ("'abc'.charAt(-1)", "index out of range: -1"),
        ("url('relative')", "URL parse error"),
        (
            "quantity('1 Gi')",
            "quantities must match the regular expression",
        ),
        ("9223372036854775807 + 1", "integer overflow"),
        ("1 % 0", "modulus by zero"),
    ];
    for (expr, want) in cases {
        let got = eval(expr).err().unwrap_or_default();
        assert!(got.contains(want), "{expr}: got {got:?}, want {want:?}");
    }
}

#[test]
fn compile_errors_carry_position() {
    let env = Env::crd(
        &serde_json::json!({"type": "object", "properties": {"name": {"type": "string"}}}),
        false,
    );
    let cases = [
        (
            "self.name == 1",
            "compilation failed: ERROR: <input>:1:11: found no matching overload for '_==_' applied to '(string, int)'\n | self.name == 1\n | ..........^",
        ),
        (
            "self.name.startsWith(1)",
            "compilation failed: ERROR: <input>:1:21: found no matching overload for 'startsWith' applied to 'string.(int)'\n | self.name.startsWith(1)\n | ....................^",
        ),
        (
            "self.nmae == 'x'",
            "compilation failed: ERROR: <input>:1:5: undefined field 'nmae'\n | self.nmae == 'x'\n | ....^",
        ),
        (
            "bogus(self)",
            "compilation failed: ERROR: <input>:1:6: undeclared reference to 'bogus' (in container '')\n | bogus(self)\n | .....^",
        ),
        // Kubernetes enables HomogeneousAggregateLiterals.
        (
            "[1, 'a'] == []",
            "compilation failed: ERROR: <input>:1:5: expected type 'int' but found 'string'\n | [1, 'a'] == []\n | ....^",
        ),
    ];
    for (expr, want) in cases {
        let got = compile(expr, &env).err().map(|e| e.to_string());
        assert_eq!(got.as_deref(), Some(want), "{expr}");
    }
}

#[test]
fn hostile_input_neither_panics_nor_overflows() {
    // Run on a small stack, as an API server worker thread would.
    let handle = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let env = Env::new().with_dyn("x");
            let mut exprs: Vec<String> = vec![
                vec!["1"; 5000].join(" + "),
                format!("{}1{}", "(".repeat(3000), ")".repeat(3000)),
                format!("{}true", "!".repeat(3000)),
                format!("x{}", ".a".repeat(3000)),
                format!("{}1{}", "[".repeat(3000), "]".repeat(3000)),
                vec!["true"; 5000].join(" && "),
                "x.all(a, x.all(b, x.all(c, true)))".into(),
                "'\\".into(),
                "{1: 2, 1: 3}".into(),
                "[1, 'a']".into(),
                "a.b(".into(),
                "\u{0}\u{1}".into(),
                "1.0 / 0.0 > 0.0".into(),
                "int(1e300)".into(),
                "timestamp('9999-12-31T23:59:59Z') + duration('24h')".into(),
                "'a'.matches('(((')".into(),
                "'x'.split('', -5)".into(),
                "''.charAt(0) == ''".into(),
            ];
            for i in 0..200u32 {
                // Cheap pseudo-random garbage from the grammar's alphabet.
                let alphabet: Vec<char> =
                    "x.()[]{}'\"!?:,+-*/%<>=&|0123456789abc _".chars().collect();
                let mut s = String::new();
                let mut state = i.wrapping_mul(2654435761).wrapping_add(1);
                for _ in 0..40 {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    s.push(alphabet[(state as usize) % alphabet.len()]);
                }
                exprs.push(s);
            }
            let big = EvalValue::list((0..3000).map(EvalValue::Int).collect());
            let mut act = Activation::new();
            act.insert("x", big);
            for e in &exprs {
                if let Ok(p) = compile(e, &env) {
                    let _ = p.eval(&act);
                }
            }
        })
        .expect("spawns");
    assert!(handle.join().is_ok());
}

/// Unbounded values (an admission policy's `object`) have size `u64::MAX` in
/// the cost model: `in` and friends must saturate, not overflow.
#[test]
fn costs_of_unbounded_values_saturate() {
    let env = berth_cel::Env::admission_policy();
    for expr in [
        "'team' in object.metadata.labels",
        "object.metadata.name.startsWith('x')",
        "object.metadata.name == oldObject.metadata.name",
        "object.metadata.name.matches('^a')",
        "[1, 2].sum() > 0 && object.spec.items.all(i, i.name in ['a'])",
    ] {
        let p = berth_cel::compile(expr, &env).unwrap_or_else(|e| panic!("{expr}: {}", e.message));
        assert!(p.estimated_cost() > 0, "{expr}");
    }
}
