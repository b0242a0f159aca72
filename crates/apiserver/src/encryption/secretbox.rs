//! The `secretbox` provider: NaCl secretbox (XSalsa20-Poly1305) with a 32-byte
//! key and a random 24-byte nonce before the sealed value (`nonce || tag ||
//! ciphertext`, NaCl's layout), as upstream's `secretbox.NewSecretboxTransformer`
//! (which authenticates no extra data).

use crypto_secretbox::aead::{Aead, KeyInit};
use crypto_secretbox::{Nonce, XSalsa20Poly1305};

use super::{TransformError, random_bytes};

const NONCE: usize = 24;
/// Poly1305's tag.
const OVERHEAD: usize = 16;

#[derive(Clone)]
pub struct Secretbox(Box<XSalsa20Poly1305>);

impl std::fmt::Debug for Secretbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secretbox")
    }
}

impl Secretbox {
    /// `None` unless the key is 32 bytes long.
    pub fn new(key: &[u8]) -> Option<Self> {
        (key.len() == 32)
            .then(|| XSalsa20Poly1305::new_from_slice(key).ok())
            .flatten()
            .map(|c| Secretbox(Box::new(c)))
    }

    pub fn to_storage(&self, plain: &[u8]) -> Result<Vec<u8>, TransformError> {
        let mut nonce = [0u8; NONCE];
        random_bytes(&mut nonce)?;
        let sealed = self
            .0
            .encrypt(Nonce::from_slice(&nonce), plain)
            .map_err(|_| TransformError::new("secretbox: encryption failed"))?;
        let mut out = Vec::with_capacity(NONCE + sealed.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    pub fn from_storage(&self, data: &[u8]) -> Result<Vec<u8>, TransformError> {
        if data.len() < NONCE + OVERHEAD {
            return Err(TransformError::new(
                "the stored data was shorter than the required size",
            ));
        }
        let (nonce, sealed) = data.split_at(NONCE);
        self.0
            .decrypt(Nonce::from_slice(nonce), sealed)
            // Upstream's message for a box that does not open (wrong key, tampered).
            .map_err(|_| TransformError::new("output array was not large enough for encryption"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 32] = *b"0123456789abcdef0123456789abcdef";

    #[test]
    fn round_trips() {
        let t = Secretbox::new(&KEY).unwrap();
        for plain in [&b""[..], b"x", &[7u8; 100]] {
            let sealed = t.to_storage(plain).unwrap();
            assert_eq!(sealed.len(), NONCE + OVERHEAD + plain.len());
            assert_eq!(t.from_storage(&sealed).unwrap(), plain);
        }
        assert_ne!(
            t.to_storage(b"same").unwrap(),
            t.to_storage(b"same").unwrap()
        );
        for len in [0, 16, 24, 31, 33] {
            assert!(Secretbox::new(&vec![1u8; len]).is_none(), "{len}");
        }
    }

    /// NaCl's own secretbox test vector (tests/secretbox.c in NaCl, also in Go's
    /// x/crypto/nacl/secretbox tests): the layout upstream reads.
    #[test]
    fn opens_the_nacl_test_vector() {
        let key = hex(NACL_KEY);
        let data = [hex(NACL_NONCE), hex(NACL_BOX)].concat();
        let t = Secretbox::new(&key).unwrap();
        assert_eq!(t.from_storage(&data).unwrap(), hex(NACL_MESSAGE));
    }

    const NACL_KEY: &str = "1b27556473e985d462cd51197a9a46c76009549eac6474f206c4ee0844f68389";
    const NACL_NONCE: &str = "69696ee955b62b73cd62bda875fc73d68219e0036b7a0b37";
    const NACL_MESSAGE: &str = "be075fc53c81f2d5cf141316ebeb0c7b5228c52a4c62cbd44b66849b64244ffce5ecbaaf33bd751a1ac728d45e6c61296cdc3c01233561f41db66cce314adb310e3be8250c46f06dceea3a7fa1348057e2f6556ad6b1318a024a838f21af1fde048977eb48f59ffd4924ca1c60902e52f0a089bc76897040e082f937763848645e0705";
    const NACL_BOX: &str = "f3ffc7703f9400e52a7dfb4b3d3305d98e993b9f48681273c29650ba32fc76ce48332ea7164d96a4476fb8c531a1186ac0dfc17c98dce87b4da7f011ec48c97271d2c20f9b928fe2270d6fb863d51738b48eeee314a7cc8ab932164548e526ae90224368517acfeabd6bb3732bc0e9da99832b61ca01b6de56244a9e88d5f9b37973f622a43d14a6599b1f654cb45a74e355a5";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn damaged_values_fail() {
        let t = Secretbox::new(&KEY).unwrap();
        let sealed = t.to_storage(b"some secret data").unwrap();
        let mut tampered = sealed.clone();
        tampered[NONCE + OVERHEAD + 2] ^= 1;
        let wrong_key = Secretbox::new(&[9u8; 32]).unwrap();
        let open = "output array was not large enough for encryption";
        let cases: Vec<(&str, &Secretbox, Vec<u8>, &str)> = vec![
            (
                "shorter than nonce and tag",
                &t,
                sealed[..NONCE + 10].to_vec(),
                "the stored data was shorter than the required size",
            ),
            ("truncated", &t, sealed[..sealed.len() - 1].to_vec(), open),
            ("tampered ciphertext", &t, tampered, open),
            ("wrong key", &wrong_key, sealed.clone(), open),
        ];
        for (name, key, data, want) in cases {
            let err = key.from_storage(&data).expect_err(name).to_string();
            assert_eq!(err, want, "{name}");
        }
    }
}
