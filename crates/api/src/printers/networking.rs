//! `networking.k8s.io/v1` kinds.

use serde_json::Value;

use super::core::load_balancer_ingress;
use super::format::{arr, format_label_selector, get, name, obj, opt_str, str_at};
use super::{AGE, NAME, Printer, age, col};

pub(super) fn printer(kind: &str) -> Option<&'static Printer> {
    Some(match kind {
        "Ingress" => &INGRESS,
        "IngressClass" => &INGRESS_CLASS,
        "NetworkPolicy" => &NETWORK_POLICY,
        _ => return None,
    })
}

static INGRESS: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Class",
            "string",
            "The name of the IngressClass resource that should be used for additional configuration",
        ),
        col(
            "Hosts",
            "string",
            "Hosts that incoming requests are matched against before the ingress rule",
        ),
        col(
            "Address",
            "string",
            "Address is a list containing ingress points for the load-balancer",
        ),
        col("Ports", "string", "Ports of TLS configurations that open"),
        AGE,
    ],
    cells: |o, now| {
        // Any TLS section means 443 is served too.
        let ports = if arr(o, &["spec", "tls"]).is_empty() {
            "80"
        } else {
            "80, 443"
        };
        vec![
            name(o).into(),
            opt_str(o, &["spec", "ingressClassName"])
                .unwrap_or("<none>")
                .into(),
            format_hosts(arr(o, &["spec", "rules"])).into(),
            load_balancer_ingress(o).into(),
            ports.into(),
            age(o, now).into(),
        ]
    },
};

/// Upstream `formatHosts`: up to three hosts, "*" when no rule names one. The
/// "more" count is over all rules, hostless ones included, as upstream.
fn format_hosts(rules: &[Value]) -> String {
    const MAX: usize = 3;
    let mut list: Vec<&str> = Vec::new();
    let mut more = false;
    for rule in rules {
        if list.len() == MAX {
            more = true;
        }
        let host = str_at(rule, &["host"]);
        if !more && !host.is_empty() {
            list.push(host);
        }
    }
    if list.is_empty() {
        return "*".to_string();
    }
    let ret = list.join(",");
    if more {
        format!("{ret} + {} more...", rules.len() - MAX)
    } else {
        ret
    }
}

static INGRESS_CLASS: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Controller",
            "string",
            "Controller that is responsible for handling this class",
        ),
        col(
            "Parameters",
            "string",
            "A reference to a resource with additional parameters",
        ),
        AGE,
    ],
    cells: |o, now| {
        let parameters = match obj(o, &["spec", "parameters"]) {
            None => "<none>".to_string(),
            Some(_) => {
                let kind = str_at(o, &["spec", "parameters", "kind"]);
                let group = opt_str(o, &["spec", "parameters", "apiGroup"])
                    .map(|g| format!(".{g}"))
                    .unwrap_or_default();
                format!(
                    "{kind}{group}/{}",
                    str_at(o, &["spec", "parameters", "name"])
                )
            }
        };
        vec![
            name(o).into(),
            str_at(o, &["spec", "controller"]).into(),
            parameters.into(),
            age(o, now).into(),
        ]
    },
};

static NETWORK_POLICY: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Pod-Selector",
            "string",
            "Selects the pods to which this NetworkPolicy object applies.",
        ),
        AGE,
    ],
    cells: |o, now| {
        // podSelector is a struct upstream, so an absent one selects everything.
        let sel = get(o, &["spec", "podSelector"])
            .filter(|v| !v.is_null())
            .cloned()
            .unwrap_or(Value::Object(Default::default()));
        vec![
            name(o).into(),
            format_label_selector(Some(&sel)).into(),
            age(o, now).into(),
        ]
    },
};

#[cfg(test)]
mod tests {
    use super::super::testutil::{ago, now};
    use super::*;
    use serde_json::json;

    #[test]
    fn ingress_rows() {
        let ing = json!({"metadata": {"name": "web", "creationTimestamp": ago(90)},
            "spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["a.example.com"]}],
                     "rules": [{"host": "a.example.com"}, {"host": "b.example.com"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.7"}]}}});
        assert_eq!(
            Value::from((INGRESS.cells)(&ing, now())),
            json!([
                "web",
                "nginx",
                "a.example.com,b.example.com",
                "203.0.113.7",
                "80, 443",
                "90s"
            ])
        );
        let bare = json!({"metadata": {"name": "x"}, "spec": {"rules": [{"http": {}}]}});
        assert_eq!(
            Value::from((INGRESS.cells)(&bare, now())),
            json!(["x", "<none>", "*", "", "80", "<unknown>"])
        );
    }

    #[test]
    fn ingress_hosts_cap_at_three() {
        let rules: Vec<Value> = ["a", "b", "", "c", "d", "e"]
            .iter()
            .map(|h| json!({"host": h}))
            .collect();
        assert_eq!(format_hosts(&rules), "a,b,c + 3 more...");
        let rules: Vec<Value> = ["a", "b", "c"].iter().map(|h| json!({"host": h})).collect();
        assert_eq!(format_hosts(&rules), "a,b,c");
    }

    #[test]
    fn ingress_class_and_network_policy() {
        let ic = json!({"metadata": {"name": "nginx"}, "spec": {"controller": "k8s.io/ingress-nginx",
            "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "external-lb"}}});
        assert_eq!(
            (INGRESS_CLASS.cells)(&ic, now())[2],
            json!("IngressParameters.k8s.example.com/external-lb")
        );
        let ic = json!({"metadata": {"name": "nginx"}, "spec": {"controller": "c"}});
        assert_eq!((INGRESS_CLASS.cells)(&ic, now())[2], json!("<none>"));
        let np = json!({"metadata": {"name": "deny"}, "spec": {"podSelector": {"matchLabels": {"role": "db"}}}});
        assert_eq!((NETWORK_POLICY.cells)(&np, now())[1], json!("role=db"));
        let np = json!({"metadata": {"name": "deny"}, "spec": {"podSelector": {}}});
        assert_eq!((NETWORK_POLICY.cells)(&np, now())[1], json!("<none>"));
    }
}
