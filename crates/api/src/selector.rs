//! Label selectors (`-l`, `?labelSelector=`, metav1.LabelSelector) and field
//! selectors (`?fieldSelector=`), with upstream's syntax, validation and
//! error messages, plus the per-kind field sets upstream lets clients select on.

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use serde_json::{Map, Value};

use crate::validation::{FieldError, aggregate_message, is_qualified_name, is_valid_label_value};

/// A selector that could not be parsed or built; the message is upstream's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

/// Something labels can be looked up in.
pub trait Labels {
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl Labels for HashMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// A JSON object of labels; non-string values count as absent.
impl Labels for Map<String, Value> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }
}

/// A selector operator (upstream's `selection.Operator`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// One `key op values` term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// Builds a validated requirement (upstream's `NewRequirement`); errors
    /// carry upstream's field paths (`key`, `values[0][key]`).
    pub fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Self, SelectorError> {
        let mut errs = Vec::new();
        for msg in is_qualified_name(key) {
            errs.push(FieldError::invalid("key", key, msg));
        }
        let values_json =
            || Value::Array(values.iter().map(|v| Value::String(v.clone())).collect());
        match operator {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    errs.push(FieldError::invalid(
                        "values",
                        values_json(),
                        "for 'in', 'notin' operators, values set can't be empty",
                    ));
                }
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => {
                if values.len() != 1 {
                    errs.push(FieldError::invalid(
                        "values",
                        values_json(),
                        "exact-match compatibility requires one single value",
                    ));
                }
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    errs.push(FieldError::invalid(
                        "values",
                        values_json(),
                        "values set must be empty for exists and does not exist",
                    ));
                }
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(FieldError::invalid(
                        "values",
                        values_json(),
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if v.parse::<i64>().is_err() {
                        errs.push(FieldError::invalid(
                            format!("values[{i}]"),
                            v.as_str(),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let msgs = is_valid_label_value(v);
            if !msgs.is_empty() {
                errs.push(FieldError::invalid(
                    format!("values[{i}][{key}]"),
                    v.as_str(),
                    msgs.join("; "),
                ));
            }
        }
        if !errs.is_empty() {
            return Err(SelectorError(aggregate_message(&errs)));
        }
        Ok(Requirement {
            key: key.to_string(),
            operator,
            values,
        })
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn operator(&self) -> Operator {
        self.operator
    }

    pub fn values(&self) -> &[String] {
        &self.values
    }

    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        let has = |v: &str| self.values.iter().any(|x| x == v);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                labels.label(&self.key).is_some_and(has)
            }
            Operator::NotIn | Operator::NotEquals => !labels.label(&self.key).is_some_and(has),
            Operator::Exists => labels.label(&self.key).is_some(),
            Operator::DoesNotExist => labels.label(&self.key).is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(have) = labels.label(&self.key).and_then(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                let Some(want) = self.values.first().and_then(|v| v.parse::<i64>().ok()) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
        };
        f.write_str(op)?;
        let mut values = self.values.clone();
        values.sort();
        let joined = values.join(",");
        if matches!(self.operator, Operator::In | Operator::NotIn) {
            write!(f, "({joined})")
        } else {
            f.write_str(&joined)
        }
    }
}

/// A label selector: requirements ANDed together, or "nothing".
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl LabelSelector {
    /// Matches every object.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Matches no object (what a nil metav1.LabelSelector converts to).
    pub fn nothing() -> Self {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Parses the string syntax (upstream's `labels.Parse`).
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut requirements = Parser::new(s).parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// Equality requirements for each pair (upstream's `SelectorFromSet`).
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut requirements: Vec<Requirement> = pairs
            .into_iter()
            .map(|(k, v)| Requirement {
                key: k.to_string(),
                operator: Operator::Equals,
                values: vec![v.to_string()],
            })
            .collect();
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        LabelSelector {
            requirements,
            nothing: false,
        }
    }

    /// Converts a metav1.LabelSelector (`LabelSelectorAsSelector`): null
    /// selects nothing, an empty selector everything.
    pub fn from_meta(v: &Value) -> Result<Self, SelectorError> {
        let obj = match v {
            Value::Null => return Ok(Self::nothing()),
            Value::Object(o) => o,
            other => return Err(SelectorError(format!("invalid label selector: {other}"))),
        };
        let match_labels = match obj.get("matchLabels") {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(other) => return Err(SelectorError(format!("invalid matchLabels: {other}"))),
        };
        let exprs = match obj.get("matchExpressions") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(a)) => a.as_slice(),
            Some(other) => return Err(SelectorError(format!("invalid matchExpressions: {other}"))),
        };
        let mut requirements = Vec::new();
        for (k, v) in match_labels.into_iter().flatten() {
            let v = v
                .as_str()
                .ok_or_else(|| SelectorError(format!("invalid value for label {k:?}: {v}")))?;
            requirements.push(Requirement::new(k, Operator::Equals, vec![v.to_string()])?);
        }
        for expr in exprs {
            let key = expr.get("key").and_then(Value::as_str).unwrap_or("");
            let op_value = expr.get("operator").and_then(Value::as_str).unwrap_or("");
            let op = match op_value {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                other => {
                    return Err(SelectorError(format!(
                        "{} is not a valid label selector operator",
                        crate::validation::go_quote(other)
                    )));
                }
            };
            let values: Vec<String> = match expr.get("values") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|v| {
                        v.as_str()
                            .map(String::from)
                            .ok_or_else(|| SelectorError(format!("invalid value: {v}")))
                    })
                    .collect::<Result<_, _>>()?,
                Some(other) => return Err(SelectorError(format!("invalid values: {other}"))),
            };
            requirements.push(Requirement::new(key, op, values)?);
        }
        if requirements.is_empty() {
            return Ok(Self::everything());
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// True when the selector does not restrict anything.
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    pub fn matches_nothing(&self) -> bool {
        self.nothing
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Matches an object's `metadata.labels`.
    pub fn matches_object(&self, obj: &Value) -> bool {
        let empty = Map::new();
        let labels = obj
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        self.matches(labels)
    }

    /// The single value `key` must have, when the selector pins one.
    pub fn requires_exact_match(&self, key: &str) -> Option<&str> {
        let r = self.requirements.iter().find(|r| r.key == key)?;
        match r.operator {
            Operator::Equals | Operator::DoubleEquals | Operator::In if r.values.len() == 1 => {
                r.values.first().map(String::as_str)
            }
            _ => None,
        }
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.requirements.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    Error,
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &str) -> Option<Token> {
    Some(match s {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "in" => Token::In,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "notin" => Token::NotIn,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

/// Splits the input into tokens exactly as upstream's lexer does.
fn lex(s: &str) -> Vec<(Token, String)> {
    let b = s.as_bytes();
    let mut pos = 0;
    let mut out = Vec::new();
    loop {
        while pos < b.len() && is_whitespace(b[pos]) {
            pos += 1;
        }
        if pos >= b.len() {
            out.push((Token::End, String::new()));
            return out;
        }
        let start = pos;
        if is_special(b[pos]) {
            // Longest run of special characters that is still a token.
            let mut last: Option<(Token, usize)> = None;
            while pos < b.len() && is_special(b[pos]) {
                pos += 1;
                match keyword(&s[start..pos]) {
                    Some(t) => last = Some((t, pos)),
                    None if last.is_some() => {
                        pos -= 1;
                        break;
                    }
                    None => {}
                }
            }
            match last {
                Some((t, end)) => {
                    pos = end;
                    out.push((t, s[start..end].to_string()));
                }
                None => out.push((
                    Token::Error,
                    format!("error expected: keyword found '{}'", &s[start..pos]),
                )),
            }
        } else {
            while pos < b.len() && !is_special(b[pos]) && !is_whitespace(b[pos]) {
                pos += 1;
            }
            let lit = String::from_utf8_lossy(&b[start..pos]).into_owned();
            let tok = keyword(&lit).unwrap_or(Token::Identifier);
            out.push((tok, lit));
        }
    }
}

struct Parser {
    items: Vec<(Token, String)>,
    pos: usize,
}

/// Whether `in`/`notin` count as identifiers (after an operator they do).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

impl Parser {
    fn new(s: &str) -> Self {
        Parser {
            items: lex(s),
            pos: 0,
        }
    }

    fn item(&self, ctx: Context) -> (Token, String) {
        let (tok, lit) = self
            .items
            .get(self.pos)
            .cloned()
            .unwrap_or((Token::End, String::new()));
        let tok = match tok {
            Token::In | Token::NotIn if ctx == Context::Values => Token::Identifier,
            t => t,
        };
        (tok, lit)
    }

    fn lookahead(&self, ctx: Context) -> (Token, String) {
        self.item(ctx)
    }

    fn consume(&mut self, ctx: Context) -> (Token, String) {
        let it = self.item(ctx);
        self.pos += 1;
        it
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut reqs = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self.parse_requirement().map_err(|e| {
                        SelectorError(format!("unable to parse requirement: {}", e.0))
                    })?;
                    reqs.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::End => return Ok(reqs),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(SelectorError(format!(
                                    "found '{l2}', expected: identifier after ','"
                                )));
                            }
                        }
                        _ => {
                            return Err(SelectorError(format!(
                                "found '{l}', expected: ',' or 'end of string'"
                            )));
                        }
                    }
                }
                Token::End => return Ok(reqs),
                _ => {
                    return Err(SelectorError(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    )));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, SelectorError> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        if let Some(op @ (Operator::Exists | Operator::DoesNotExist)) = op {
            return Requirement::new(&key, op, Vec::new());
        }
        let op = self.parse_operator()?;
        let values = match op {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(&key, op, values)
    }

    fn parse_key_and_infer_operator(
        &mut self,
    ) -> Result<(String, Option<Operator>), SelectorError> {
        let mut op = None;
        let (mut tok, mut lit) = self.consume(Context::Values);
        if tok == Token::DoesNotExist {
            op = Some(Operator::DoesNotExist);
            (tok, lit) = self.consume(Context::Values);
        }
        if tok != Token::Identifier {
            return Err(SelectorError(format!(
                "found '{lit}', expected: identifier"
            )));
        }
        let msgs = is_qualified_name(&lit);
        if !msgs.is_empty() {
            // Upstream validates with a nil field path here.
            let e = FieldError::invalid("<nil>", lit.as_str(), msgs.join("; "));
            return Err(SelectorError(e.to_string()));
        }
        let (next, _) = self.lookahead(Context::Values);
        if (next == Token::End || next == Token::Comma) && op != Some(Operator::DoesNotExist) {
            op = Some(Operator::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<Operator, SelectorError> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(SelectorError(format!(
                    "found '{lit}', expected: {BINARY_OPERATORS}"
                )));
            }
        })
    }

    /// `(a,b,c)`; the result is a sorted set, so duplicates collapse.
    fn parse_values(&mut self) -> Result<Vec<String>, SelectorError> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Token::OpenPar {
            return Err(SelectorError(format!("found '{lit}' expected: '('")));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let set = self.parse_identifiers_list()?;
                let (t, _) = self.consume(Context::Values);
                if t != Token::ClosedPar {
                    return Err(SelectorError(format!("found '{lit}', expected: ')'")));
                }
                Ok(set)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(SelectorError(format!(
                "found '{lit}', expected: ',', ')' or identifier"
            ))),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, SelectorError> {
        let mut set = std::collections::BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Token::Identifier => {
                    set.insert(lit);
                    let (t2, l2) = self.lookahead(Context::Values);
                    match t2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(set.into_iter().collect()),
                        _ => {
                            return Err(SelectorError(format!(
                                "found '{l2}', expected: ',' or ')'"
                            )));
                        }
                    }
                }
                Token::Comma => {
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    let (t2, _) = self.lookahead(Context::Values);
                    if t2 == Token::ClosedPar {
                        set.insert(String::new());
                        return Ok(set.into_iter().collect());
                    }
                    if t2 == Token::Comma {
                        set.insert(String::new());
                    }
                }
                _ => {
                    return Err(SelectorError(format!(
                        "found '{lit}', expected: ',', or identifier"
                    )));
                }
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, SelectorError> {
        let (tok, _) = self.lookahead(Context::Values);
        if tok == Token::End || tok == Token::Comma {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Token::Identifier {
            return Ok(vec![lit]);
        }
        Err(SelectorError(format!(
            "found '{lit}', expected: identifier"
        )))
    }
}

// ---------------------------------------------------------------------------
// Field selectors.

/// One `field=value` or `field!=value` term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldTerm {
    pub field: String,
    pub value: String,
    /// True for `!=`.
    pub negated: bool,
}

/// A field selector: terms ANDed together; empty selects everything.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

/// Escapes `\`, `,` and `=` in a field selector value.
pub fn escape_field_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Undoes [`escape_field_value`], rejecting bad escapes and bare `,`/`=`.
pub fn unescape_field_value(s: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(SelectorError(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                )));
            }
            out.push(c);
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            // Upstream prints the rune as its number.
            ',' | '=' => {
                return Err(SelectorError(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                )));
            }
            c => out.push(c),
        }
    }
    if in_slash {
        return Err(SelectorError(
            "invalid field selector: invalid escape sequence: \\".into(),
        ));
    }
    Ok(out)
}

/// Splits on commas not preceded by a backslash.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// The first `!=`, `==` or `=` splits a term.
fn split_term(term: &str) -> Option<(&str, &str, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for op in ["!=", "==", "="] {
            if let Some(rhs) = rest.strip_prefix(op) {
                return Some((&term[..i], op, rhs));
            }
        }
    }
    None
}

impl FieldSelector {
    pub fn everything() -> Self {
        Self::default()
    }

    /// Parses `a=b,c!=d` (upstream's `fields.ParseSelector`).
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut parts = split_terms(s);
        parts.sort();
        let mut terms = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((lhs, op, rhs)) = split_term(part) else {
                return Err(SelectorError(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            terms.push(FieldTerm {
                field: lhs.to_string(),
                value: unescape_field_value(rhs)?,
                negated: op == "!=",
            });
        }
        Ok(FieldSelector { terms })
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn terms(&self) -> &[FieldTerm] {
        &self.terms
    }

    /// Matches against field values; a field `get` knows nothing of reads
    /// as the empty string, as upstream's `fields.Set` does.
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| {
            let have = get(&t.field).unwrap_or_default();
            (have == t.value) != t.negated
        })
    }

    /// The value `field` must equal, when a term pins it.
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| !t.negated && t.field == field)
            .map(|t| t.value.as_str())
    }

    /// Rewrites every term (upstream's `Transform`), e.g. to map
    /// `spec.host` to `spec.nodeName` or to reject unsupported fields.
    pub fn transform(
        &self,
        mut f: impl FnMut(&str, &str) -> Result<(String, String), SelectorError>,
    ) -> Result<Self, SelectorError> {
        let mut terms = Vec::with_capacity(self.terms.len());
        for t in &self.terms {
            let (field, value) = f(&t.field, &t.value)?;
            terms.push(FieldTerm {
                field,
                value,
                negated: t.negated,
            });
        }
        Ok(FieldSelector { terms })
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .terms
            .iter()
            .map(|t| {
                let op = if t.negated { "!=" } else { "=" };
                format!("{}{op}{}", t.field, escape_field_value(&t.value))
            })
            .collect();
        f.write_str(&parts.join(","))
    }
}

/// How a kind's field labels are checked.
enum FieldSet {
    /// No conversion registered: only `metadata.name` / `metadata.namespace`.
    Default,
    /// An explicit list, and the message format for anything else.
    Listed(&'static [&'static str], UnsupportedStyle),
}

enum UnsupportedStyle {
    /// `field label not supported: X`.
    Plain,
    /// `field label "X" not supported for batchv1.Job`.
    Job,
}

const POD_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
    "spec.host",
];
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
    "metadata.namespace",
    "metadata.name",
];
const EVENTS_V1_FIELDS: &[&str] = &[
    "reason",
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reportingController",
    "type",
    "metadata.namespace",
    "metadata.name",
];

fn field_set(kind: &str, group: &str) -> FieldSet {
    use UnsupportedStyle::{Job, Plain};
    match (group, kind) {
        ("", "Pod") => FieldSet::Listed(POD_FIELDS, Plain),
        ("", "Event") => FieldSet::Listed(EVENT_FIELDS, Plain),
        ("events.k8s.io", "Event") => FieldSet::Listed(EVENTS_V1_FIELDS, Plain),
        ("", "Node") => FieldSet::Listed(&["metadata.name", "spec.unschedulable"], Plain),
        ("", "Namespace") => FieldSet::Listed(&["metadata.name", "status.phase"], Plain),
        ("", "Secret") => FieldSet::Listed(&["metadata.name", "metadata.namespace", "type"], Plain),
        ("", "ReplicationController") => FieldSet::Listed(
            &["metadata.name", "metadata.namespace", "status.replicas"],
            Plain,
        ),
        ("", "Service") => FieldSet::Listed(
            &[
                "metadata.name",
                "metadata.namespace",
                "spec.clusterIP",
                "spec.type",
            ],
            Plain,
        ),
        ("batch", "Job") => FieldSet::Listed(
            &["metadata.name", "metadata.namespace", "status.successful"],
            Job,
        ),
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            FieldSet::Listed(&["metadata.name", "spec.signerName"], Plain)
        }
        _ => FieldSet::Default,
    }
}

/// The fields `?fieldSelector=` may name for a kind; `kind_group` is
/// `(kind, group)`, group `""` for core.
pub fn selectable_fields(kind_group: (&str, &str)) -> &'static [&'static str] {
    match field_set(kind_group.0, kind_group.1) {
        FieldSet::Default => &["metadata.name", "metadata.namespace"],
        FieldSet::Listed(list, _) => list,
    }
}

/// Whether `?fieldSelector=` may name `field` for a kind (see [`selectable_fields`]).
pub fn supported_field(kind_group: (&str, &str), field: &str) -> bool {
    selectable_fields(kind_group).contains(&field)
}

/// Upstream's error for an unsupported field label (returned as 400).
pub fn unsupported_field_message(kind_group: (&str, &str), field: &str) -> String {
    match field_set(kind_group.0, kind_group.1) {
        FieldSet::Default => format!(
            "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
            crate::validation::go_quote(field)
        ),
        FieldSet::Listed(_, UnsupportedStyle::Plain) => {
            format!("field label not supported: {field}")
        }
        FieldSet::Listed(_, UnsupportedStyle::Job) => {
            format!(
                "field label {} not supported for batchv1.Job",
                crate::validation::go_quote(field)
            )
        }
    }
}

/// Checks and converts a parsed field selector for a kind (upstream's
/// `ConvertFieldLabel`): unsupported fields are an error, `spec.host` on
/// pods becomes `spec.nodeName`, events.k8s.io names map to the stored ones.
pub fn convert_field_selector(
    kind_group: (&str, &str),
    sel: &FieldSelector,
) -> Result<FieldSelector, SelectorError> {
    sel.transform(|field, value| {
        if !supported_field(kind_group, field) {
            return Err(SelectorError(unsupported_field_message(kind_group, field)));
        }
        let field = match (kind_group.1, field) {
            ("", "spec.host") => "spec.nodeName",
            _ => field,
        };
        Ok((field.to_string(), value.to_string()))
    })
}

fn text_at(obj: &Value, path: &[&str]) -> String {
    let v = path.iter().try_fold(obj, |cur, k| cur.get(k));
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

fn int_text_at(obj: &Value, path: &[&str]) -> String {
    let v = path.iter().try_fold(obj, |cur, k| cur.get(k));
    v.and_then(Value::as_i64).unwrap_or(0).to_string()
}

fn bool_text_at(obj: &Value, path: &[&str]) -> String {
    let v = path.iter().try_fold(obj, |cur, k| cur.get(k));
    v.and_then(Value::as_bool).unwrap_or(false).to_string()
}

/// The selectable value of `field` on `obj` (wire form), as upstream's
/// `ToSelectableFields` computes it: `Some` (possibly empty) for a supported
/// field, `None` otherwise. `kind_group` is `(kind, group)`.
pub fn field_value(kind_group: (&str, &str), obj: &Value, field: &str) -> Option<String> {
    if !supported_field(kind_group, field) {
        return None;
    }
    let (kind, group) = kind_group;
    let v = match field {
        "metadata.name" => text_at(obj, &["metadata", "name"]),
        "metadata.namespace" => text_at(obj, &["metadata", "namespace"]),
        _ => match (group, kind, field) {
            ("", "Pod", "spec.host") => text_at(obj, &["spec", "nodeName"]),
            ("", "Pod", "spec.hostNetwork") => bool_text_at(obj, &["spec", "hostNetwork"]),
            ("", "Pod", "status.podIP") => {
                // The first of podIPs, falling back to the singular field.
                let first = obj
                    .get("status")
                    .and_then(|s| s.get("podIPs"))
                    .and_then(Value::as_array)
                    .and_then(|a| a.first())
                    .and_then(|p| p.get("ip"))
                    .and_then(Value::as_str);
                first
                    .map(String::from)
                    .unwrap_or_else(|| text_at(obj, &["status", "podIP"]))
            }
            ("", "Pod", "status.podIPs") => String::new(),
            ("", "Event", "source") => {
                let component = text_at(obj, &["source", "component"]);
                if component.is_empty() {
                    text_at(obj, &["reportingComponent"])
                } else {
                    component
                }
            }
            ("", "Node", "spec.unschedulable") => bool_text_at(obj, &["spec", "unschedulable"]),
            ("", "ReplicationController", "status.replicas") => {
                int_text_at(obj, &["status", "replicas"])
            }
            ("batch", "Job", "status.successful") => int_text_at(obj, &["status", "succeeded"]),
            _ => {
                let path: Vec<&str> = field.split('.').collect();
                text_at(obj, &path)
            }
        },
    };
    Some(v)
}

/// Whether `obj` of `kind_group` satisfies a (converted) field selector.
pub fn matches_fields(kind_group: (&str, &str), obj: &Value, sel: &FieldSelector) -> bool {
    sel.matches(|f| field_value(kind_group, obj, f))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_and_matches_label_selectors() {
        let set = labels(&[("app", "web"), ("tier", "front"), ("version", "3")]);
        let cases: &[(&str, bool)] = &[
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app = web", true),
            ("app!=web", false),
            ("app!=db", true),
            ("missing!=x", true),
            ("app in (web,db)", true),
            ("app in (db)", false),
            ("app notin (db)", true),
            ("missing notin (db)", true),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("app=web,tier=front", true),
            ("app=web,tier=back", false),
            ("  app = web ,  tier  in (front) ", true),
            ("version>2", true),
            ("version<2", false),
            ("app>2", false),
            ("x in (in)", false),
            ("app=", false),
        ];
        for (s, want) in cases {
            let sel = LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(sel.matches(&set), *want, "{s}");
        }
    }

    #[test]
    fn label_selector_errors_match_upstream() {
        let cases: &[(&str, &str)] = &[
            (
                "a b",
                "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "a in b",
                "unable to parse requirement: found 'b' expected: '('",
            ),
            (
                "a in (b",
                "unable to parse requirement: found '', expected: ',' or ')'",
            ),
            ("a,", "found '', expected: identifier after ','"),
            (
                "=a",
                "found '=', expected: !, identifier, or 'end of string'",
            ),
            ("a=b c", "found 'c', expected: ',' or 'end of string'"),
            (
                "a in ((b)",
                "unable to parse requirement: found '(', expected: ',', ')' or identifier",
            ),
            (
                "a/b/c=d",
                "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
            ),
            (
                "a=-b",
                "unable to parse requirement: values[0][a]: Invalid value: \"-b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ),
            (
                "a>b",
                "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
            (
                "a=!b",
                "unable to parse requirement: found '!', expected: identifier",
            ),
        ];
        for (s, msg) in cases {
            let err = LabelSelector::parse(s).expect_err(s);
            assert_eq!(err.0, *msg, "{s}");
        }
    }

    #[test]
    fn label_selector_string_form_is_sorted() {
        let sel = LabelSelector::parse("z=1,a in (c,b),!m,k").unwrap();
        assert_eq!(sel.to_string(), "a in (b,c),k,!m,z=1");
        assert_eq!(
            LabelSelector::parse("x in (,a)").unwrap().to_string(),
            "x in (,a)"
        );
        assert_eq!(sel.requires_exact_match("z"), Some("1"));
        assert_eq!(sel.requires_exact_match("a"), None);
    }

    #[test]
    fn from_meta_cases() {
        let set = labels(&[("app", "web"), ("env", "prod")]);
        let cases: Vec<(Value, bool)> = vec![
            (json!({}), true),
            (json!({"matchLabels": {"app": "web"}}), true),
            (json!({"matchLabels": {"app": "db"}}), false),
            (
                json!({"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "dev"]}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["prod"]}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "env", "operator": "Exists"}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "x", "operator": "DoesNotExist"}]}),
                true,
            ),
            (
                json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]}),
                false,
            ),
            (Value::Null, false),
        ];
        for (v, want) in cases {
            let sel = LabelSelector::from_meta(&v).unwrap_or_else(|e| panic!("{v}: {e}"));
            assert_eq!(sel.matches(&set), want, "{v}");
        }
        assert!(LabelSelector::from_meta(&json!({})).unwrap().is_empty());
        assert!(
            LabelSelector::from_meta(&Value::Null)
                .unwrap()
                .matches_nothing()
        );
        assert_eq!(
            LabelSelector::from_meta(
                &json!({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["b"]}]})
            )
            .unwrap_err()
            .0,
            "\"Equals\" is not a valid label selector operator"
        );
        assert_eq!(
            LabelSelector::from_meta(
                &json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})
            )
            .unwrap_err()
            .0,
            "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"
        );
        assert!(LabelSelector::from_meta(&json!(3)).is_err());
        assert!(LabelSelector::from_meta(&json!({"matchLabels": {"a": 1}})).is_err());
        assert!(LabelSelector::from_meta(&json!({"matchExpressions": [1]})).is_err());
    }

    #[test]
    fn matches_json_label_maps() {
        let sel = LabelSelector::parse("app=web").unwrap();
        let pod = json!({"metadata": {"labels": {"app": "web"}}});
        assert!(sel.matches_object(&pod));
        assert!(!sel.matches_object(&json!({"metadata": {}})));
        assert!(!sel.matches_object(&json!({"metadata": {"labels": {"app": 1}}})));
    }

    #[test]
    fn field_selectors() {
        let get = |f: &str| match f {
            "metadata.name" => Some("a,b".to_string()),
            "status.phase" => Some("Running".to_string()),
            _ => None,
        };
        let cases: &[(&str, bool)] = &[
            ("", true),
            ("status.phase=Running", true),
            ("status.phase==Running", true),
            ("status.phase!=Running", false),
            ("metadata.name=a\\,b", true),
            ("spec.nodeName=", true),
            ("spec.nodeName!=", false),
            ("status.phase=Running,metadata.name=x", false),
        ];
        for (s, want) in cases {
            let sel = FieldSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(sel.matches(get), *want, "{s}");
        }
        let errs: &[(&str, &str)] = &[
            ("foo", "invalid selector: 'foo'; can't understand 'foo'"),
            (
                "a=b=c",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "a=b\\x",
                "invalid field selector: invalid escape sequence: \\x",
            ),
            (
                "a=b\\",
                "invalid field selector: invalid escape sequence: \\",
            ),
        ];
        for (s, msg) in errs {
            assert_eq!(FieldSelector::parse(s).unwrap_err().0, *msg, "{s}");
        }
        let sel = FieldSelector::parse("b=2,a!=x\\=y").unwrap();
        assert_eq!(sel.to_string(), "a!=x\\=y,b=2");
        assert_eq!(sel.requires_exact_match("b"), Some("2"));
        assert_eq!(escape_field_value("a\\,="), "a\\\\\\,\\=");
    }

    #[test]
    fn per_kind_field_support() {
        let pod = ("Pod", "");
        assert!(supported_field(pod, "spec.nodeName"));
        assert!(supported_field(pod, "status.phase"));
        assert!(!supported_field(pod, "spec.containers"));
        assert_eq!(
            unsupported_field_message(pod, "foo"),
            "field label not supported: foo"
        );
        let rs = ("ReplicaSet", "apps");
        assert!(supported_field(rs, "metadata.name"));
        assert!(!supported_field(rs, "status.replicas"));
        assert_eq!(
            unsupported_field_message(rs, "status.replicas"),
            "\"status.replicas\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        assert_eq!(
            unsupported_field_message(("Job", "batch"), "status.failed"),
            "field label \"status.failed\" not supported for batchv1.Job"
        );
        assert!(supported_field(("Secret", ""), "type"));
        assert!(supported_field(("Node", ""), "spec.unschedulable"));
        assert!(!supported_field(("Node", ""), "metadata.namespace"));
        assert!(supported_field(
            ("Event", "events.k8s.io"),
            "regarding.name"
        ));
    }

    #[test]
    fn field_values_per_kind() {
        let pod = json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"nodeName": "n1", "restartPolicy": "Always", "hostNetwork": true},
            "status": {"phase": "Running", "podIP": "10.0.0.9", "podIPs": [{"ip": "10.0.0.1"}]}
        });
        let k = ("Pod", "");
        let cases: &[(&str, Option<&str>)] = &[
            ("metadata.name", Some("p")),
            ("metadata.namespace", Some("ns")),
            ("spec.nodeName", Some("n1")),
            ("spec.host", Some("n1")),
            ("spec.hostNetwork", Some("true")),
            ("spec.schedulerName", Some("")),
            ("status.phase", Some("Running")),
            ("status.podIP", Some("10.0.0.1")),
            ("status.nominatedNodeName", Some("")),
            ("spec.containers", None),
        ];
        for (f, want) in cases {
            assert_eq!(field_value(k, &pod, f).as_deref(), *want, "{f}");
        }
        assert_eq!(
            field_value(k, &json!({}), "spec.hostNetwork").as_deref(),
            Some("false")
        );
        let ev = json!({"involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Started", "reportingComponent": "kubelet", "type": "Normal"});
        let e = ("Event", "");
        assert_eq!(
            field_value(e, &ev, "involvedObject.kind").as_deref(),
            Some("Pod")
        );
        assert_eq!(field_value(e, &ev, "source").as_deref(), Some("kubelet"));
        assert_eq!(field_value(e, &ev, "type").as_deref(), Some("Normal"));
        assert_eq!(
            field_value(("Node", ""), &json!({}), "spec.unschedulable").as_deref(),
            Some("false")
        );
        assert_eq!(
            field_value(
                ("Job", "batch"),
                &json!({"status": {"succeeded": 2}}),
                "status.successful"
            )
            .as_deref(),
            Some("2")
        );
        assert_eq!(
            field_value(("Secret", ""), &json!({"type": "Opaque"}), "type").as_deref(),
            Some("Opaque")
        );
        assert_eq!(
            field_value(
                ("Namespace", ""),
                &json!({"status": {"phase": "Active"}}),
                "status.phase"
            )
            .as_deref(),
            Some("Active")
        );
        assert_eq!(
            field_value(
                ("ReplicationController", ""),
                &json!({"status": {"replicas": 3}}),
                "status.replicas"
            )
            .as_deref(),
            Some("3")
        );

        let sel = convert_field_selector(
            k,
            &FieldSelector::parse("spec.host=n1,status.phase!=Failed").unwrap(),
        )
        .unwrap();
        assert!(matches_fields(k, &pod, &sel));
        assert_eq!(sel.terms()[0].field, "spec.nodeName");
        assert_eq!(
            convert_field_selector(k, &FieldSelector::parse("foo=bar").unwrap())
                .unwrap_err()
                .0,
            "field label not supported: foo"
        );
    }
}
