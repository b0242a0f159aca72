//! `certificates.k8s.io/v1` kinds.

use super::format::{arr, name, opt_int, str_at};
use super::{AGE, NAME, Printer, age, col, human_duration};

pub(super) fn printer(kind: &str) -> Option<&'static Printer> {
    match kind {
        "CertificateSigningRequest" => Some(&CERTIFICATE_SIGNING_REQUEST),
        _ => None,
    }
}

// Upstream describes the columns with the v1beta1 field docs.
const SIGNER_NAME_DESC: &str = "Requested signer for the request. It is a qualified name in the form: `scope-hostname.io/name`. If empty, it will be defaulted:\n 1. If it's a kubelet client certificate, it is assigned\n    \"kubernetes.io/kube-apiserver-client-kubelet\".\n 2. If it's a kubelet serving certificate, it is assigned\n    \"kubernetes.io/kubelet-serving\".\n 3. Otherwise, it is assigned \"kubernetes.io/legacy-unknown\".\nDistribution of trust for signers happens out of band. You can select on this field using `spec.signerName`.";
const REQUEST_DESC: &str = "Base64-encoded PKCS#10 CSR data";
const EXPIRATION_DESC: &str = "expirationSeconds is the requested duration of validity of the issued certificate. The certificate signer may issue a certificate with a different validity duration so a client must check the delta between the notBefore and and notAfter fields in the issued certificate to determine the actual duration.\n\nThe v1.22+ in-tree implementations of the well-known Kubernetes signers will honor this field as long as the requested duration is not greater than the maximum duration they will honor per the --cluster-signing-duration CLI flag to the Kubernetes controller manager.\n\nCertificate signers may not honor this field for various reasons:\n\n  1. Old signer that is unaware of the field (such as the in-tree\n     implementations prior to v1.22)\n  2. Signer whose configured maximum is shorter than the requested duration\n  3. Signer whose configured minimum is longer than the requested duration\n\nThe minimum valid value for expirationSeconds is 600, i.e. 10 minutes.";
const CONDITIONS_DESC: &str = "Conditions applied to the request, such as approval or denial.";

static CERTIFICATE_SIGNING_REQUEST: Printer = Printer {
    columns: &[
        NAME,
        AGE,
        col("SignerName", "string", SIGNER_NAME_DESC),
        col("Requestor", "string", REQUEST_DESC),
        col("RequestedDuration", "string", EXPIRATION_DESC),
        col("Condition", "string", CONDITIONS_DESC),
    ],
    cells: |o, now| {
        let signer = match str_at(o, &["spec", "signerName"]) {
            "" => "<none>".to_string(),
            s => s.to_string(),
        };
        let duration = opt_int(o, &["spec", "expirationSeconds"]).map_or_else(
            || "<none>".to_string(),
            |s| human_duration(chrono::Duration::seconds(s)),
        );
        vec![
            name(o).into(),
            age(o, now).into(),
            signer.into(),
            str_at(o, &["spec", "username"]).into(),
            duration.into(),
            condition(o).into(),
        ]
    },
};

/// Upstream's `extractCSRStatus`: Denied over Approved over Pending, then
/// `,Failed` and `,Issued` (conditions of other types are ignored).
fn condition(o: &serde_json::Value) -> String {
    let has = |t: &str| {
        arr(o, &["status", "conditions"])
            .iter()
            .any(|c| str_at(c, &["type"]) == t)
    };
    let mut s = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_string();
    if has("Failed") {
        s.push_str(",Failed");
    }
    if !str_at(o, &["status", "certificate"]).is_empty() {
        s.push_str(",Issued");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{ago, now};
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn csr_rows() {
        let row = |o: Value| Value::from((CERTIFICATE_SIGNING_REQUEST.cells)(&o, now()));
        let base = |status: Value| {
            json!({"metadata": {"name": "node-csr-1", "creationTimestamp": ago(30)},
                   "spec": {"signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                            "username": "system:bootstrap:abcdef"},
                   "status": status})
        };
        let cases = [
            (json!({}), "Pending"),
            (json!({"conditions": [{"type": "Approved"}]}), "Approved"),
            (
                json!({"conditions": [{"type": "Approved"}], "certificate": "LS0t"}),
                "Approved,Issued",
            ),
            (
                json!({"conditions": [{"type": "Approved"}, {"type": "Failed"}]}),
                "Approved,Failed",
            ),
            (
                json!({"conditions": [{"type": "Approved"}, {"type": "Denied"}]}),
                "Denied",
            ),
            (json!({"conditions": [{"type": "Other"}]}), "Pending"),
        ];
        for (status, want) in cases {
            assert_eq!(
                row(base(status)),
                json!([
                    "node-csr-1",
                    "30s",
                    "kubernetes.io/kube-apiserver-client-kubelet",
                    "system:bootstrap:abcdef",
                    "<none>",
                    want
                ]),
                "{want}"
            );
        }
        let timed = json!({"metadata": {"name": "c"}, "spec": {"expirationSeconds": 86400}});
        let cells = row(timed);
        assert_eq!(cells[2], "<none>");
        assert_eq!(cells[4], "24h");
    }
}
