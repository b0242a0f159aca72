//! `k8s.io/apiserver/pkg/cel/library/format.go`: `format.named(name)`,
//! `format.<name>()` and `<format>.validate(string)`, with apimachinery's
//! validation messages.

use std::sync::Arc;

use berth_api::validation as v;

use crate::functions::CallResult;
use crate::value::EvalValue;

/// The named formats upstream registers.
pub const NAMES: &[&str] = &[
    "dns1123Label",
    "dns1123Subdomain",
    "dns1035Label",
    "qualifiedName",
    "dns1123LabelPrefix",
    "dns1123SubdomainPrefix",
    "dns1035LabelPrefix",
    "labelValue",
    "uri",
    "uuid",
    "byte",
    "date",
    "datetime",
];

/// Prefix formats validate a name with a random suffix still to come: a
/// trailing dash is allowed (upstream's `ValidateNameFunc` with prefix=true).
fn prefix_check(s: &str, f: fn(&str) -> Vec<String>) -> Vec<String> {
    let trimmed = s.strip_suffix('-').unwrap_or(s);
    f(trimmed)
}

fn validate(format: &str, s: &str) -> Vec<String> {
    match format {
        "dns1123Label" => v::is_dns1123_label(s),
        "dns1123Subdomain" => v::is_dns1123_subdomain(s),
        "dns1035Label" => v::is_dns1035_label(s),
        "qualifiedName" => v::is_qualified_name(s),
        "dns1123LabelPrefix" => prefix_check(s, v::is_dns1123_label),
        "dns1123SubdomainPrefix" => prefix_check(s, v::is_dns1123_subdomain),
        "dns1035LabelPrefix" => prefix_check(s, v::is_dns1035_label),
        "labelValue" => v::is_valid_label_value(s),
        "uri" => match crate::library::url::Url::parse(s) {
            Some(_) => vec![],
            None => vec!["invalid URI".into()],
        },
        "uuid" => {
            let ok = s.len() == 36
                && s.char_indices().all(|(i, c)| match i {
                    8 | 13 | 18 | 23 => c == '-',
                    _ => c.is_ascii_hexdigit(),
                });
            if ok {
                vec![]
            } else {
                vec!["does not match the UUID format".into()]
            }
        }
        "byte" => match crate::functions::base64_decode(s) {
            Some(_) => vec![],
            None => vec!["invalid base64".into()],
        },
        "date" => match chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
            Ok(_) => vec![],
            Err(_) => vec!["invalid date".into()],
        },
        "datetime" => match crate::functions::parse_timestamp(s) {
            Some(_) => vec![],
            None => vec!["invalid datetime".into()],
        },
        _ => vec![],
    }
}

pub(crate) fn call(
    name: &str,
    target: Option<&EvalValue>,
    args: &[EvalValue],
) -> Option<CallResult> {
    use EvalValue as V;
    if let Some(f) = name.strip_prefix("format.") {
        return match (f, target, args) {
            ("named", None, [V::String(n)]) => Some(Ok(V::Optional(
                NAMES
                    .contains(&&**n)
                    .then(|| Box::new(V::Format(n.clone()))),
            ))),
            (f, None, []) if NAMES.contains(&f) => Some(Ok(V::Format(Arc::from(f)))),
            _ => None,
        };
    }
    match (name, target, args) {
        ("validate", Some(V::Format(f)), [V::String(s)]) => {
            let errs = validate(f, s);
            Some(Ok(V::Optional((!errs.is_empty()).then(|| {
                Box::new(V::list(errs.into_iter().map(V::from).collect()))
            }))))
        }
        _ => None,
    }
}
