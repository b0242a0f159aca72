//! The `aescbc` provider: AES in CBC mode with PKCS#7 padding, a random 16-byte
//! IV before the ciphertext (`iv || CBC(pad(plain))`), as upstream's
//! `aes.NewCBCTransformer`. CBC authenticates nothing, so the storage key is
//! not used; upstream no longer recommends it but still supports it.

use aes::cipher::block_padding::{NoPadding, Pkcs7};
use aes::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};

use super::{TransformError, random_bytes};

const BLOCK: usize = 16;

type Enc<C> = cbc::Encryptor<C>;
type Dec<C> = cbc::Decryptor<C>;

/// One aescbc key (16, 24 or 32 bytes: AES-128, -192 or -256).
#[derive(Clone)]
pub struct AesCbc {
    key: Vec<u8>,
}

impl std::fmt::Debug for AesCbc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AesCbc({} bit)", self.key.len() * 8)
    }
}

impl AesCbc {
    /// `None` unless the key is 16, 24 or 32 bytes long.
    pub fn new(key: &[u8]) -> Option<Self> {
        matches!(key.len(), 16 | 24 | 32).then(|| AesCbc { key: key.to_vec() })
    }

    pub fn to_storage(&self, plain: &[u8]) -> Result<Vec<u8>, TransformError> {
        let mut iv = [0u8; BLOCK];
        random_bytes(&mut iv)?;
        let sealed = match self.key.len() {
            16 => Enc::<aes::Aes128>::new_from_slices(&self.key, &iv)
                .map(|c| c.encrypt_padded_vec_mut::<Pkcs7>(plain)),
            24 => Enc::<aes::Aes192>::new_from_slices(&self.key, &iv)
                .map(|c| c.encrypt_padded_vec_mut::<Pkcs7>(plain)),
            _ => Enc::<aes::Aes256>::new_from_slices(&self.key, &iv)
                .map(|c| c.encrypt_padded_vec_mut::<Pkcs7>(plain)),
        }
        .map_err(|e| TransformError::new(format!("aescbc: {e}")))?;
        let mut out = Vec::with_capacity(BLOCK + sealed.len());
        out.extend_from_slice(&iv);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    pub fn from_storage(&self, data: &[u8]) -> Result<Vec<u8>, TransformError> {
        if data.len() < BLOCK {
            return Err(TransformError::new(
                "the stored data was shorter than the required size",
            ));
        }
        let (iv, body) = data.split_at(BLOCK);
        if body.len() % BLOCK != 0 {
            return Err(TransformError::new(
                "the stored data is not a multiple of the block size",
            ));
        }
        let mut buf = body.to_vec();
        // Decrypted without unpadding: the padding is checked below with
        // upstream's two messages.
        let res = match self.key.len() {
            16 => Dec::<aes::Aes128>::new_from_slices(&self.key, iv)
                .map(|c| c.decrypt_padded_mut::<NoPadding>(&mut buf).map(|_| ())),
            24 => Dec::<aes::Aes192>::new_from_slices(&self.key, iv)
                .map(|c| c.decrypt_padded_mut::<NoPadding>(&mut buf).map(|_| ())),
            _ => Dec::<aes::Aes256>::new_from_slices(&self.key, iv)
                .map(|c| c.decrypt_padded_mut::<NoPadding>(&mut buf).map(|_| ())),
        };
        match res {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(TransformError::new(format!("aescbc: {e}"))),
            Err(e) => return Err(TransformError::new(format!("aescbc: {e}"))),
        }
        let pad = buf.last().copied().unwrap_or(0) as usize;
        if pad == 0 || pad > buf.len() {
            return Err(TransformError::new(
                "invalid PKCS7 data (empty or not padded)",
            ));
        }
        let size = buf.len() - pad;
        if buf[size..].iter().any(|&b| b as usize != pad) {
            return Err(TransformError::new("invalid padding on input"));
        }
        buf.truncate(size);
        Ok(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 32] = *b"0123456789abcdef0123456789abcdef";

    #[test]
    fn round_trips_every_key_size_and_length() {
        for len in [16, 24, 32] {
            let t = AesCbc::new(&KEY[..len]).unwrap();
            for plain in [&b""[..], b"x", b"0123456789abcdef", &[7u8; 100]] {
                let sealed = t.to_storage(plain).unwrap();
                // IV, then whole blocks: a full block of padding on aligned input.
                assert_eq!(sealed.len(), BLOCK + (plain.len() / BLOCK + 1) * BLOCK);
                assert_eq!(t.from_storage(&sealed).unwrap(), plain);
            }
        }
    }

    #[test]
    fn rejects_key_sizes_other_than_aes() {
        for len in [0, 8, 15, 17, 31, 33, 64] {
            assert!(AesCbc::new(&vec![1u8; len]).is_none(), "{len}");
        }
    }

    #[test]
    fn random_iv_per_write() {
        let t = AesCbc::new(&KEY).unwrap();
        assert_ne!(
            t.to_storage(b"same").unwrap(),
            t.to_storage(b"same").unwrap()
        );
    }

    /// A value written by upstream's layout (IV, then AES-256-CBC of the
    /// PKCS#7-padded plaintext), computed with OpenSSL: `printf 'hello secret' |
    /// openssl enc -aes-256-cbc -K <hex KEY> -iv 000102…0f`.
    #[test]
    fn reads_an_independently_encrypted_value() {
        let iv: Vec<u8> = (0u8..16).collect();
        let ct = hex(OPENSSL_CT);
        let data = [iv, ct].concat();
        let t = AesCbc::new(&KEY).unwrap();
        assert_eq!(t.from_storage(&data).unwrap(), b"hello secret");
    }

    const OPENSSL_CT: &str = "fb11ab139b3293a2b7083d8a630be05f";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn damaged_values_fail_with_upstream_messages() {
        let t = AesCbc::new(&KEY).unwrap();
        // 16 bytes of plaintext: IV, one data block, one block of padding (0x10 × 16).
        let sealed = t.to_storage(b"some secret data").unwrap();
        assert_eq!(sealed.len(), 48);
        // CBC is not authenticated: a flipped ciphertext bit flips the same bit
        // of the next plaintext block, so these flips land in the padding block
        // deterministically.
        let flip = |at: usize| {
            let mut d = sealed.clone();
            d[at] ^= 0x55;
            d
        };
        let full = [(0u8..16).collect::<Vec<u8>>(), hex(OPENSSL_CT)].concat();
        let wrong_key = AesCbc::new(&[9u8; 32]).unwrap();
        let cases: Vec<(&str, &AesCbc, Vec<u8>, &str)> = vec![
            (
                "shorter than an IV",
                &t,
                sealed[..10].to_vec(),
                "the stored data was shorter than the required size",
            ),
            (
                "truncated mid-block",
                &t,
                sealed[..45].to_vec(),
                "the stored data is not a multiple of the block size",
            ),
            (
                "IV only",
                &t,
                sealed[..16].to_vec(),
                "invalid PKCS7 data (empty or not padded)",
            ),
            (
                "padding length byte tampered",
                &t,
                flip(31),
                "invalid PKCS7 data (empty or not padded)",
            ),
            (
                "padding byte tampered",
                &t,
                flip(30),
                "invalid padding on input",
            ),
            ("wrong key", &wrong_key, full, "invalid "),
        ];
        for (name, key, data, want) in cases {
            let err = key.from_storage(&data).expect_err(name).to_string();
            assert!(err.starts_with(want), "{name}: {err}");
        }
    }
}
