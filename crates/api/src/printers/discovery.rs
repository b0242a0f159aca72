//! `discovery.k8s.io/v1` kinds.

use serde_json::Value;

use super::format::{arr, get, more_list, name, str_at};
use super::{AGE, NAME, Printer, age, col};

pub(super) fn printer(kind: &str) -> Option<&'static Printer> {
    match kind {
        "EndpointSlice" => Some(&ENDPOINT_SLICE),
        _ => None,
    }
}

static ENDPOINT_SLICE: Printer = Printer {
    columns: &[
        NAME,
        col(
            "AddressType",
            "string",
            "addressType specifies the type of address carried by this EndpointSlice.",
        ),
        col(
            "Ports",
            "string",
            "ports specifies the list of network ports exposed by each endpoint in this slice.",
        ),
        col(
            "Endpoints",
            "string",
            "endpoints is a list of unique endpoints in this slice.",
        ),
        AGE,
    ],
    cells: |o, now| {
        // Upstream `formatDiscoveryPorts`: the number, else the name, else "*".
        let ports =
            arr(o, &["ports"])
                .iter()
                .map(|p| match get(p, &["port"]).and_then(Value::as_i64) {
                    Some(n) => n.to_string(),
                    None => get(p, &["name"])
                        .and_then(Value::as_str)
                        .unwrap_or("*")
                        .to_string(),
                });
        let addresses = arr(o, &["endpoints"])
            .iter()
            .flat_map(|e| arr(e, &["addresses"]))
            .map(|a| a.as_str().unwrap_or("").to_string());
        vec![
            name(o).into(),
            str_at(o, &["addressType"]).into(),
            more_list(ports, 3).into(),
            more_list(addresses, 3).into(),
            age(o, now).into(),
        ]
    },
};

#[cfg(test)]
mod tests {
    use super::super::testutil::now;
    use super::*;
    use serde_json::json;

    #[test]
    fn endpoint_slice_rows() {
        let es = json!({"metadata": {"name": "web-abc"}, "addressType": "IPv4",
            "ports": [{"name": "http", "port": 80, "protocol": "TCP"}, {"name": "metrics"}, {}, {"port": 9000}],
            "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2", "10.0.0.3"]}, {"addresses": ["10.0.0.4"]}]});
        assert_eq!(
            Value::from((ENDPOINT_SLICE.cells)(&es, now())),
            json!([
                "web-abc",
                "IPv4",
                "80,metrics,* + 1 more...",
                "10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...",
                "<unknown>"
            ])
        );
        let empty = json!({"metadata": {"name": "e"}, "addressType": "IPv6"});
        assert_eq!(
            Value::from((ENDPOINT_SLICE.cells)(&empty, now())),
            json!(["e", "IPv6", "<unset>", "<unset>", "<unknown>"])
        );
    }
}
