//! Upstream's naming controller (`apiextensions-apiserver/pkg/controller/status`)
//! and establishing controller, as one pure function: which names of a CRD are
//! accepted (none may collide with another CRD of the same group) and its
//! `NamesAccepted` and `Established` conditions.

use std::collections::BTreeSet;

use serde_json::{Value, json};

/// Names other CRDs of the same group have been accepted with.
#[derive(Debug, Default)]
struct UsedNames {
    resources: BTreeSet<String>,
    kinds: BTreeSet<String>,
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn list_of(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

fn used_names(crd: &Value, all: &[Value]) -> UsedNames {
    let group = crd.pointer("/spec/group").and_then(Value::as_str);
    let name = crd.pointer("/metadata/name").and_then(Value::as_str);
    let mut used = UsedNames::default();
    for other in all {
        if other.pointer("/metadata/name").and_then(Value::as_str) == name
            || other.pointer("/spec/group").and_then(Value::as_str) != group
        {
            continue;
        }
        let Some(accepted) = other.pointer("/status/acceptedNames") else {
            continue;
        };
        for r in [str_of(accepted, "plural"), str_of(accepted, "singular")] {
            if !r.is_empty() {
                used.resources.insert(r.to_string());
            }
        }
        used.resources.extend(list_of(accepted, "shortNames"));
        for k in [str_of(accepted, "kind"), str_of(accepted, "listKind")] {
            if !k.is_empty() {
                used.kinds.insert(k.to_string());
            }
        }
    }
    used
}

/// Upstream's `equalToAcceptedOrFresh`.
fn fresh(requested: &str, accepted: &str, used: &BTreeSet<String>) -> Result<(), String> {
    if requested == accepted || !used.contains(requested) {
        Ok(())
    } else {
        Err(format!("\"{requested}\" is already in use"))
    }
}

fn condition(type_: &str, status: bool, reason: &str, message: &str) -> Value {
    json!({
        "type": type_,
        "status": if status { "True" } else { "False" },
        "reason": reason,
        "message": message,
    })
}

/// The status the CRD should have: accepted names and its NamesAccepted and
/// Established conditions (other conditions and `storedVersions` kept).
/// `now` stamps conditions whose status changes.
pub fn desired_status(crd: &Value, all: &[Value], now: &str) -> Value {
    let requested = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let status = crd.get("status").cloned().unwrap_or(json!({}));
    let accepted = status.get("acceptedNames").cloned().unwrap_or(json!({}));
    let used = used_names(crd, all);
    let mut names = accepted.clone();
    if !names.is_object() {
        names = json!({});
    }
    let mut problem: Option<(&str, String)> = None;
    let mut note = |p: Option<(&'static str, String)>| {
        if problem.is_none() {
            problem = p;
        }
    };
    note(accept(
        &requested,
        &accepted,
        "plural",
        "PluralConflict",
        &used.resources,
        &mut names,
    ));
    note(accept(
        &requested,
        &accepted,
        "singular",
        "SingularConflict",
        &used.resources,
        &mut names,
    ));
    // Short names are accepted all together or not at all.
    let want_short = list_of(&requested, "shortNames");
    let had_short = list_of(&accepted, "shortNames");
    match want_short
        .iter()
        .find(|s| !had_short.contains(s) && used.resources.contains(*s))
    {
        Some(s) => note(Some((
            "ShortNamesConflict",
            format!("\"{s}\" is already in use"),
        ))),
        None if want_short.is_empty() => {
            if let Some(m) = names.as_object_mut() {
                m.remove("shortNames");
            }
        }
        None => names["shortNames"] = json!(want_short),
    }
    note(accept(
        &requested,
        &accepted,
        "kind",
        "KindConflict",
        &used.kinds,
        &mut names,
    ));
    // listKind defaults to <kind>List, as the CRD's defaulting does.
    let mut requested_list = requested.clone();
    if str_of(&requested_list, "listKind").is_empty() && !str_of(&requested, "kind").is_empty() {
        requested_list["listKind"] = json!(format!("{}List", str_of(&requested, "kind")));
    }
    note(accept(
        &requested_list,
        &accepted,
        "listKind",
        "ListKindConflict",
        &used.kinds,
        &mut names,
    ));
    match requested.get("categories") {
        Some(c) if c.as_array().is_some_and(|a| !a.is_empty()) => names["categories"] = c.clone(),
        _ => {
            if let Some(m) = names.as_object_mut() {
                m.remove("categories");
            }
        }
    }
    let names_accepted = match &problem {
        None => condition("NamesAccepted", true, "NoConflicts", "no conflicts found"),
        Some((reason, message)) => condition("NamesAccepted", false, reason, message),
    };
    let old_conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let find = |t: &str| {
        old_conditions
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(t))
            .cloned()
    };
    // Once Established, a CRD stays so (a later conflict leaves its old names served).
    let established = match find("Established") {
        Some(c) if c.get("status").and_then(Value::as_str) == Some("True") => c,
        _ if problem.is_none() => condition(
            "Established",
            true,
            "InitialNamesAccepted",
            "the initial names have been accepted",
        ),
        _ => condition(
            "Established",
            false,
            "NotAccepted",
            "not all names are accepted",
        ),
    };
    let mut conditions = Vec::new();
    for new in [names_accepted, established] {
        let old = find(&str_of_owned(&new, "type"));
        conditions.push(stamp(new, old.as_ref(), now));
    }
    for c in &old_conditions {
        let t = str_of(c, "type");
        if t != "NamesAccepted" && t != "Established" {
            conditions.push(c.clone());
        }
    }
    let mut out = status;
    if !out.is_object() {
        out = json!({});
    }
    out["acceptedNames"] = names;
    out["conditions"] = Value::Array(conditions);
    out
}

/// Accepts the requested name `field` unless another CRD of the group holds it
/// (then the accepted name stays and the conflict is returned).
fn accept(
    requested: &Value,
    accepted: &Value,
    field: &str,
    reason: &'static str,
    pool: &BTreeSet<String>,
    names: &mut Value,
) -> Option<(&'static str, String)> {
    let want = str_of(requested, field);
    match fresh(want, str_of(accepted, field), pool) {
        Ok(()) => {
            if want.is_empty() {
                if let Some(m) = names.as_object_mut() {
                    m.remove(field);
                }
            } else {
                names[field] = json!(want);
            }
            None
        }
        Err(e) => Some((reason, e)),
    }
}

fn str_of_owned(v: &Value, key: &str) -> String {
    str_of(v, key).to_string()
}

/// Keeps the old condition's transition time when its status did not change.
fn stamp(mut new: Value, old: Option<&Value>, now: &str) -> Value {
    let same = old.is_some_and(|o| o.get("status") == new.get("status"));
    let at = match old.and_then(|o| o.get("lastTransitionTime")) {
        Some(t) if same => t.clone(),
        _ => json!(now),
    };
    new["lastTransitionTime"] = at;
    new
}

/// Sets (or replaces) one condition, stamping its transition time.
pub fn set_condition(status: &mut Value, new: Value, now: &str) {
    if !status.is_object() {
        *status = json!({});
    }
    let t = str_of_owned(&new, "type");
    let mut conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let old = conditions
        .iter()
        .position(|c| c.get("type").and_then(Value::as_str) == Some(t.as_str()));
    let stamped = stamp(new, old.map(|i| &conditions[i]), now);
    match old {
        Some(i) => conditions[i] = stamped,
        None => conditions.push(stamped),
    }
    status["conditions"] = Value::Array(conditions);
}

/// A condition value (for [`set_condition`]).
pub fn new_condition(type_: &str, status: bool, reason: &str, message: &str) -> Value {
    condition(type_, status, reason, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(name: &str, plural: &str, kind: &str, short: &[&str], accepted: Option<Value>) -> Value {
        let (p, g) = name.split_once('.').unwrap();
        assert_eq!(p, plural);
        let mut c = json!({
            "metadata": {"name": name},
            "spec": {"group": g, "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "shortNames": short}},
        });
        if let Some(a) = accepted {
            c["status"] = json!({"acceptedNames": a});
        }
        c
    }

    fn cond<'a>(s: &'a Value, t: &str) -> &'a Value {
        s["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == t)
            .unwrap()
    }

    #[test]
    fn fresh_names_are_accepted_and_established() {
        let c = crd(
            "crontabs.stable.example.com",
            "crontabs",
            "CronTab",
            &["ct"],
            None,
        );
        let s = desired_status(&c, std::slice::from_ref(&c), "T1");
        assert_eq!(
            s["acceptedNames"],
            json!({"plural": "crontabs", "singular": "crontab", "shortNames": ["ct"], "kind": "CronTab", "listKind": "CronTabList"})
        );
        assert_eq!(cond(&s, "NamesAccepted")["reason"], "NoConflicts");
        assert_eq!(cond(&s, "NamesAccepted")["message"], "no conflicts found");
        assert_eq!(cond(&s, "Established")["status"], "True");
        assert_eq!(cond(&s, "Established")["reason"], "InitialNamesAccepted");
        assert_eq!(cond(&s, "Established")["lastTransitionTime"], "T1");
        // Reconciling again changes nothing, not even the times.
        let mut again = c.clone();
        again["status"] = s.clone();
        assert_eq!(desired_status(&again, &[again.clone()], "T2"), s);
    }

    #[test]
    fn conflicts_in_a_group_are_refused_with_upstream_reasons() {
        let taken = json!({"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "listKind": "CronTabList", "shortNames": ["ct"]});
        let a = crd(
            "crontabs.stable.example.com",
            "crontabs",
            "CronTab",
            &["ct"],
            Some(taken),
        );
        let cases = [
            (
                crd("crontab.stable.example.com", "crontab", "Other", &[], None),
                "PluralConflict",
                "\"crontab\" is already in use",
            ),
            (
                {
                    let mut c = crd("others.stable.example.com", "others", "CronTab", &[], None);
                    c["spec"]["names"]["singular"] = json!("other");
                    c
                },
                "KindConflict",
                "\"CronTab\" is already in use",
            ),
            (
                crd(
                    "others.stable.example.com",
                    "others",
                    "Other",
                    &["ct"],
                    None,
                ),
                "ShortNamesConflict",
                "\"ct\" is already in use",
            ),
        ];
        for (b, reason, message) in cases {
            let s = desired_status(&b, &[a.clone(), b.clone()], "T");
            let na = cond(&s, "NamesAccepted");
            assert_eq!(na["status"], "False", "{reason}");
            assert_eq!(na["reason"], reason);
            assert_eq!(na["message"], message);
            assert_eq!(cond(&s, "Established")["status"], "False");
            assert_eq!(cond(&s, "Established")["reason"], "NotAccepted");
        }
        // Another group may reuse every name.
        let c = crd(
            "crontabs.other.example.com",
            "crontabs",
            "CronTab",
            &["ct"],
            None,
        );
        let s = desired_status(&c, &[a.clone(), c.clone()], "T");
        assert_eq!(cond(&s, "NamesAccepted")["status"], "True");
    }

    #[test]
    fn set_condition_keeps_time_when_status_unchanged() {
        let mut s = json!({});
        set_condition(&mut s, new_condition("Terminating", true, "A", "a"), "T1");
        set_condition(&mut s, new_condition("Terminating", true, "B", "b"), "T2");
        assert_eq!(cond(&s, "Terminating")["lastTransitionTime"], "T1");
        assert_eq!(cond(&s, "Terminating")["reason"], "B");
        set_condition(&mut s, new_condition("Terminating", false, "C", "c"), "T3");
        assert_eq!(cond(&s, "Terminating")["lastTransitionTime"], "T3");
    }
}
