//! The `identity` provider: values are stored as they are. Reading refuses
//! encrypted data (`k8s:enc:` is reserved for it), so that an `identity` listed
//! before an encrypting provider still lets the later one read its values, as
//! upstream's `identity.NewEncryptCheckTransformer`.

use super::{ENCRYPTED_PREFIX, TransformError};

/// Passes values through on write; on read refuses what another provider encrypted.
#[derive(Debug, Clone, Copy, Default)]
pub struct Identity;

impl Identity {
    pub fn from_storage(self, data: &[u8]) -> Result<&[u8], TransformError> {
        if data.starts_with(ENCRYPTED_PREFIX) {
            return Err(TransformError::new(
                "identity transformer tried to read encrypted data",
            ));
        }
        Ok(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_plain_data_and_refuses_encrypted_data() {
        let cases: &[(&[u8], Option<&str>)] = &[
            (b"{\"kind\":\"Secret\"}", None),
            (b"", None),
            // Protobuf-encoded objects start with `k8s\0`, not the reserved prefix.
            (b"k8s\x00\x0a\x0c", None),
            (
                b"k8s:enc:aescbc:v1:key1:xxxx",
                Some("identity transformer tried to read encrypted data"),
            ),
        ];
        for (data, want) in cases {
            let got = Identity.from_storage(data);
            match want {
                None => assert_eq!(got.ok(), Some(*data)),
                Some(msg) => assert_eq!(got.err().map(|e| e.to_string()).as_deref(), Some(*msg)),
            }
        }
    }
}
