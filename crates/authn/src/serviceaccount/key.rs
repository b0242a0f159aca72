//! The issuer's signing key: one ECDSA P-256 key kept as PKCS#8 PEM in
//! `<dir>/service-account.key`, its `kid`, and the raw ES256 sign/verify.

use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair,
    UnparsedPublicKey,
};

use crate::Error;

/// The key file's name inside the directory given to `Issuer::load_or_create`.
pub const KEY_FILE: &str = "service-account.key";

const PEM_LABEL: &str = "PRIVATE KEY";

/// DER of a P-256 SubjectPublicKeyInfo up to the point: SEQUENCE {
/// SEQUENCE { id-ecPublicKey, prime256v1 }, BIT STRING (0 unused bits) }. The
/// 65-byte uncompressed point follows. Fixed for the curve, so no ASN.1 writer.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// Length of the uncompressed P-256 point `0x04 || x || y`.
pub(crate) const POINT_LEN: usize = 65;
/// Length of an ES256 JWS signature, `r || s`.
pub(crate) const SIGNATURE_LEN: usize = 64;

pub(crate) struct SigningKey {
    pair: EcdsaKeyPair,
    rng: SystemRandom,
    kid: String,
}

impl SigningKey {
    /// Reads the key file, or creates it (mode 0600) when there is none.
    pub(crate) fn load_or_create(dir: &Path) -> Result<SigningKey, Error> {
        let path = dir.join(KEY_FILE);
        match fs::read(&path) {
            Ok(pem) => Self::from_pem(&path, &pem),
            Err(e) if e.kind() == ErrorKind::NotFound => Self::create(dir, &path),
            Err(source) => Err(Error::Io { path, source }),
        }
    }

    fn create(dir: &Path, path: &Path) -> Result<SigningKey, Error> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| Error::Generate)?;
        let pem = encode_pem(PEM_LABEL, pkcs8.as_ref());

        fs::create_dir_all(dir).map_err(io(dir))?;
        // Written whole to a private temporary file, then hard-linked into
        // place: a reader never sees half a key, and when two processes race
        // the link fails for the loser (no clobbering), which then loads the
        // winner's key so both sign with the same one.
        let tmp = dir.join(format!(".{KEY_FILE}.{}.tmp", uuid::Uuid::new_v4()));
        let written = (|| {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(pem.as_bytes())?;
            f.sync_all()
        })();
        let linked = written.and_then(|()| fs::hard_link(&tmp, path));
        // The temporary name is ours alone; failing to remove it leaves only
        // litter, so it does not fail the load.
        let _ = fs::remove_file(&tmp);
        match linked {
            Ok(()) => {
                // Make the new name durable before any token is signed with it.
                if let Ok(d) = fs::File::open(dir) {
                    let _ = d.sync_all();
                }
                Self::from_pkcs8(path, pkcs8.as_ref(), rng)
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                let pem = fs::read(path).map_err(io(path))?;
                Self::from_pem(path, &pem)
            }
            Err(source) => Err(Error::Io {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    fn from_pem(path: &Path, pem: &[u8]) -> Result<SigningKey, Error> {
        let der = decode_pem(pem).map_err(|reason| Error::Pem {
            path: path.to_path_buf(),
            reason,
        })?;
        Self::from_pkcs8(path, &der, SystemRandom::new())
    }

    fn from_pkcs8(path: &Path, der: &[u8], rng: SystemRandom) -> Result<SigningKey, Error> {
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der, &rng).map_err(|e| {
                Error::Key {
                    path: PathBuf::from(path),
                    reason: e.to_string(),
                }
            })?;
        let kid = key_id(pair.public_key().as_ref());
        Ok(SigningKey { pair, rng, kid })
    }

    pub(crate) fn kid(&self) -> &str {
        &self.kid
    }

    /// The uncompressed public point `0x04 || x || y`.
    pub(crate) fn public_point(&self) -> &[u8] {
        self.pair.public_key().as_ref()
    }

    /// An ES256 JWS signature (`r || s`, 64 bytes) over `message`.
    pub(crate) fn sign(&self, message: &[u8]) -> Result<Vec<u8>, Error> {
        self.pair
            .sign(&self.rng, message)
            .map(|s| s.as_ref().to_vec())
            .map_err(|_| Error::Sign)
    }

    pub(crate) fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, self.public_point())
            .verify(message, signature)
            .is_ok()
    }
}

/// Upstream's `keyIDFromPublicKey`: base64url (unpadded) SHA-256 of the
/// public key's DER SubjectPublicKeyInfo. One-way, so a kid never reveals
/// the key to someone who would then skip fetching the JWKS.
pub(crate) fn key_id(point: &[u8]) -> String {
    let mut spki = Vec::with_capacity(P256_SPKI_PREFIX.len() + point.len());
    spki.extend_from_slice(&P256_SPKI_PREFIX);
    spki.extend_from_slice(point);
    URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, &spki))
}

fn encode_pem(label: &str, der: &[u8]) -> String {
    let b64 = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    // base64 output is ASCII, so 64-byte chunks are whole characters.
    for line in b64.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The DER of the first PEM block, which must be an unencrypted PKCS#8
/// `PRIVATE KEY`; other blocks are named so an operator knows what to convert.
fn decode_pem(pem: &[u8]) -> Result<Vec<u8>, String> {
    let text = std::str::from_utf8(pem).map_err(|_| "not PEM text".to_string())?;
    let mut lines = text.lines().map(str::trim);
    let label = lines
        .by_ref()
        .find_map(|l| l.strip_prefix("-----BEGIN ")?.strip_suffix("-----"))
        .ok_or_else(|| "no PEM block found".to_string())?;
    match label {
        PEM_LABEL => {}
        "EC PRIVATE KEY" => {
            return Err("SEC1 \"EC PRIVATE KEY\" is not supported; convert it with \
                        `openssl pkcs8 -topk8 -nocrypt`"
                .into());
        }
        other => {
            return Err(format!(
                "PEM block {other:?} is not an unencrypted \"PRIVATE KEY\""
            ));
        }
    }
    let end = format!("-----END {label}-----");
    let mut b64 = String::new();
    for line in lines {
        if line == end {
            return STANDARD
                .decode(b64.as_bytes())
                .map_err(|e| format!("PEM body: {e}"));
        }
        b64.push_str(line);
    }
    Err(format!("PEM block {label:?} has no end line"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_round_trips_and_names_what_it_refuses() {
        let der: Vec<u8> = (0..=255u8).collect();
        let pem = encode_pem(PEM_LABEL, &der);
        assert!(pem.lines().all(|l| l.len() <= 64));
        assert_eq!(decode_pem(pem.as_bytes()), Ok(der));

        let cases: &[(&str, &str)] = &[
            ("", "no PEM block found"),
            (
                "-----BEGIN EC PRIVATE KEY-----\nAA==\n-----END EC PRIVATE KEY-----\n",
                "SEC1",
            ),
            (
                "-----BEGIN ENCRYPTED PRIVATE KEY-----\n",
                "not an unencrypted",
            ),
            ("-----BEGIN PRIVATE KEY-----\nAAAA\n", "no end line"),
            (
                "-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n",
                "PEM body",
            ),
        ];
        for (input, want) in cases {
            let err = decode_pem(input.as_bytes()).expect_err(input);
            assert!(err.contains(want), "{input:?}: {err}");
        }
    }

    #[test]
    fn key_id_hashes_the_subject_public_key_info() {
        // The SPKI prefix must make a well-formed DER SEQUENCE of 0x59 bytes.
        assert_eq!(P256_SPKI_PREFIX.len() + POINT_LEN, 2 + 0x59);
        let point = [4u8; POINT_LEN];
        let kid = key_id(&point);
        assert_eq!(kid.len(), 43, "32 bytes, unpadded base64url");
        assert_ne!(kid, key_id(&[5u8; POINT_LEN]));
    }
}
