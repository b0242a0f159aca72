//! The `aesgcm` provider: AES-GCM with a random 12-byte nonce before the sealed
//! value (`nonce || ciphertext || tag`), the storage key as authenticated data
//! so a value copied under another key does not read, as upstream's
//! `aes.NewGCMTransformer` with etcd3's `authenticatedDataString(key)`.
//! Random nonces mean a key must be rotated before 2^32 writes (NIST SP 800-38D).

use aes_gcm::aead::consts::U12;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes128Gcm, Aes256Gcm, AesGcm as Gcm, Nonce};

use super::{TransformError, random_bytes};

const NONCE: usize = 12;

type Aes192Gcm = Gcm<aes::Aes192, U12>;

/// One aesgcm key (16, 24 or 32 bytes), its key schedule computed once.
#[derive(Clone)]
pub enum AesGcm {
    A128(Box<Aes128Gcm>),
    A192(Box<Aes192Gcm>),
    A256(Box<Aes256Gcm>),
}

impl std::fmt::Debug for AesGcm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let bits = match self {
            AesGcm::A128(_) => 128,
            AesGcm::A192(_) => 192,
            AesGcm::A256(_) => 256,
        };
        write!(f, "AesGcm({bits} bit)")
    }
}

impl AesGcm {
    /// `None` unless the key is 16, 24 or 32 bytes long.
    pub fn new(key: &[u8]) -> Option<Self> {
        Some(match key.len() {
            16 => AesGcm::A128(Box::new(Aes128Gcm::new_from_slice(key).ok()?)),
            24 => AesGcm::A192(Box::new(Aes192Gcm::new_from_slice(key).ok()?)),
            32 => AesGcm::A256(Box::new(Aes256Gcm::new_from_slice(key).ok()?)),
            _ => return None,
        })
    }

    pub fn to_storage(&self, plain: &[u8], aad: &[u8]) -> Result<Vec<u8>, TransformError> {
        let mut nonce = [0u8; NONCE];
        random_bytes(&mut nonce)
            .map_err(|e| TransformError::new(format!("failed to write nonce for AES-GCM: {e}")))?;
        let n = Nonce::<U12>::from_slice(&nonce);
        let payload = Payload { msg: plain, aad };
        let sealed = match self {
            AesGcm::A128(c) => c.encrypt(n, payload),
            AesGcm::A192(c) => c.encrypt(n, payload),
            AesGcm::A256(c) => c.encrypt(n, payload),
        }
        .map_err(|_| TransformError::new("aesgcm: encryption failed"))?;
        let mut out = Vec::with_capacity(NONCE + sealed.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    pub fn from_storage(&self, data: &[u8], aad: &[u8]) -> Result<Vec<u8>, TransformError> {
        if data.len() < NONCE {
            return Err(TransformError::new(
                "the stored data was shorter than the required size",
            ));
        }
        let (nonce, sealed) = data.split_at(NONCE);
        let n = Nonce::<U12>::from_slice(nonce);
        let payload = Payload { msg: sealed, aad };
        match self {
            AesGcm::A128(c) => c.decrypt(n, payload),
            AesGcm::A192(c) => c.decrypt(n, payload),
            AesGcm::A256(c) => c.decrypt(n, payload),
        }
        // Go's crypto/cipher message, which upstream passes on.
        .map_err(|_| TransformError::new("cipher: message authentication failed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 32] = *b"0123456789abcdef0123456789abcdef";
    const AAD: &[u8] = b"/registry/secrets/default/s1";

    #[test]
    fn round_trips_every_key_size() {
        for len in [16, 24, 32] {
            let t = AesGcm::new(&KEY[..len]).unwrap();
            for plain in [&b""[..], b"x", &[7u8; 100]] {
                let sealed = t.to_storage(plain, AAD).unwrap();
                assert_eq!(sealed.len(), NONCE + plain.len() + 16);
                assert_eq!(t.from_storage(&sealed, AAD).unwrap(), plain);
            }
        }
        for len in [0, 8, 15, 17, 33] {
            assert!(AesGcm::new(&vec![1u8; len]).is_none(), "{len}");
        }
    }

    /// AES-192-GCM of "hello secret" under nonce 00…0b with the storage key as
    /// authenticated data, computed with Python's `cryptography` (AESGCM):
    /// what upstream writes for the same inputs.
    #[test]
    fn reads_an_independently_encrypted_value() {
        let data = [(0u8..12).collect::<Vec<u8>>(), hex(PY_SEALED)].concat();
        let t = AesGcm::new(&KEY[..24]).unwrap();
        assert_eq!(t.from_storage(&data, AAD).unwrap(), b"hello secret");
    }

    const PY_SEALED: &str = "c77ece5ff6d2339a7ffa767544d57e423c10fb298abb46d2374e9c90";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn damaged_or_moved_values_fail() {
        let t = AesGcm::new(&KEY).unwrap();
        let sealed = t.to_storage(b"some secret data", AAD).unwrap();
        let mut tampered = sealed.clone();
        tampered[NONCE + 3] ^= 1;
        let wrong_key = AesGcm::new(&[9u8; 32]).unwrap();
        let auth = "cipher: message authentication failed";
        type Case<'a> = (&'a str, &'a AesGcm, Vec<u8>, &'a [u8], &'a str);
        let cases: Vec<Case> = vec![
            (
                "shorter than a nonce",
                &t,
                sealed[..5].to_vec(),
                AAD,
                "the stored data was shorter than the required size",
            ),
            (
                "truncated tag",
                &t,
                sealed[..sealed.len() - 1].to_vec(),
                AAD,
                auth,
            ),
            ("nonce only", &t, sealed[..NONCE].to_vec(), AAD, auth),
            ("tampered ciphertext", &t, tampered, AAD, auth),
            ("wrong key", &wrong_key, sealed.clone(), AAD, auth),
            (
                "copied under another key",
                &t,
                sealed.clone(),
                b"/registry/secrets/default/s2",
                auth,
            ),
        ];
        for (name, key, data, aad, want) in cases {
            let err = key.from_storage(&data, aad).expect_err(name).to_string();
            assert_eq!(err, want, "{name}");
        }
    }
}
