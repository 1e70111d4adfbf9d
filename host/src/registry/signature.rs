//! Signatures of registry components, in the form `cosign sign --key` writes and
//! `cosign verify --key` reads: key-based, tag-based.
//!
//! A signature of the manifest `sha256:HEX` of `REGISTRY/REPOSITORY` is one layer of the
//! image manifest tagged `sha256-HEX.sig` in that repository:
//! - its media type is [`PAYLOAD_MEDIA_TYPE`] and its bytes the simple-signing payload, a
//!   JSON object naming the repository and the manifest's digest ([`payload`]);
//! - its annotation [`SIGNATURE_ANNOTATION`] is the base64 of an ASN.1 DER ECDSA P-256
//!   signature over the SHA-256 of those exact bytes.
//!
//! Several signatures are several layers; signing again adds one. A signature is
//! accepted when it verifies with one of the keys required and its payload is of the
//! type above and names the very manifest pulled, so a signature cannot be carried over
//! to other bytes. The payload's `docker-reference` is not compared, as cosign does not: a
//! mirror serves the same bytes under another name.
//!
//! What is not here, and why:
//! - keyless signatures (a Fulcio certificate, a Rekor entry): they need the internet;
//! - the OCI 1.1 referrers form with a Sigstore bundle (cosign 3's default when it signs):
//!   the `sigstore` crate reads neither, and `docker-registry` 2.8 has no referrers API to
//!   test it against. cosign 2 writes and reads the form here by default; cosign 3 with
//!   `--new-bundle-format=false`;
//! - a transparency log entry (Rekor): it is on the internet, so `cosign verify` takes
//!   these signatures with `--insecure-ignore-tlog=true`;
//! - cosign's own encrypted key file (`ENCRYPTED SIGSTORE PRIVATE KEY`): keys here are
//!   PEM, as `openssl` makes them; `cosign import-key-pair` takes the same key into
//!   cosign, and the public key (`cosign.pub`) is PEM either way.
//!
//! The signatures found are kept in the cache beside the manifest's record, so a component
//! pinned by digest is verified again at each load, offline, against the keys the config
//! requires then.

use super::{OciRef, Registry, RegistryError, digest_of, failed, is_sha256, write_whole};
use crate::limits::{MAX_SIGNATURE_PAYLOAD_BYTES, MAX_SIGNATURES};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{IMAGE_CONFIG_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::{Reference, RegistryOperation};
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The media type of a signature's layer: cosign's simple-signing payload.
pub const PAYLOAD_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the signature, base64 of ASN.1 DER.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The payload's `critical.type`.
const PAYLOAD_TYPE: &str = "cosign container image signature";

/// A public key a component must be signed by, with the file it came from (for messages).
#[derive(Debug, Clone)]
pub struct TrustedKey {
    pub file: String,
    key: VerifyingKey,
}

/// Reads the public keys of `require_signature = { keys = [...] }`: PEM
/// `-----BEGIN PUBLIC KEY-----` files of ECDSA P-256 keys (`cosign.pub`, or `openssl ec
/// -pubout`).
pub fn read_keys(files: &[PathBuf]) -> Result<Vec<TrustedKey>, RegistryError> {
    files
        .iter()
        .map(|path| {
            let file = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|source| RegistryError::Io {
                path: file.clone(),
                source,
            })?;
            let key = VerifyingKey::from_public_key_pem(&text).map_err(|e| RegistryError::Key {
                file: file.clone(),
                why: format!("not a PEM ECDSA P-256 public key ({e})"),
            })?;
            Ok(TrustedKey { file, key })
        })
        .collect()
}

/// [`read_keys`] of each key set.
pub fn read_signers(sets: &[Vec<PathBuf>]) -> Result<Vec<Vec<TrustedKey>>, RegistryError> {
    sets.iter().map(|keys| read_keys(keys)).collect()
}

/// Reads a private key to sign with: PEM PKCS#8 (`-----BEGIN PRIVATE KEY-----`) or SEC1
/// (`-----BEGIN EC PRIVATE KEY-----`, `openssl ecparam -genkey`), ECDSA P-256, unencrypted.
pub fn read_signing_key(path: &Path) -> Result<SigningKey, RegistryError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| RegistryError::Io {
        path: file.clone(),
        source,
    })?;
    let refused = |why: &str| RegistryError::Key {
        file: file.clone(),
        why: why.to_string(),
    };
    if text.contains("ENCRYPTED SIGSTORE PRIVATE KEY") {
        return Err(refused(
            "a cosign key file is encrypted in cosign's own format: sign with a PEM key \
             (`openssl ecparam -name prime256v1 -genkey -noout -out key.pem`), which \
             `cosign import-key-pair` takes too",
        ));
    }
    if text.contains("ENCRYPTED PRIVATE KEY") {
        return Err(refused(
            "the key is encrypted: decrypt it first (`openssl pkcs8 -topk8 -nocrypt`)",
        ));
    }
    SigningKey::from_pkcs8_pem(&text)
        .or_else(|_| p256::SecretKey::from_sec1_pem(&text).map(SigningKey::from))
        .map_err(|_| refused("not a PEM ECDSA P-256 private key (PKCS#8 or SEC1)"))
}

/// The simple-signing payload that signs the manifest `digest` of `reference`'s
/// repository, as cosign writes it.
pub fn payload(reference: &OciRef, digest: &str) -> Vec<u8> {
    let claim = Payload {
        critical: Critical {
            identity: Identity {
                docker_reference: format!(
                    "{}/{}",
                    reference.registry(),
                    reference.reference.repository()
                ),
            },
            image: Image {
                docker_manifest_digest: digest.to_string(),
            },
            kind: PAYLOAD_TYPE.to_string(),
        },
        optional: None,
    };
    serde_json::to_vec(&claim).expect("a payload serializes")
}

#[derive(Serialize, Deserialize)]
struct Payload {
    critical: Critical,
    optional: Option<serde_json::Value>,
}

#[derive(Serialize, Deserialize)]
struct Critical {
    identity: Identity,
    image: Image,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Serialize, Deserialize)]
struct Identity {
    #[serde(rename = "docker-reference")]
    docker_reference: String,
}

#[derive(Serialize, Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// One signature as found: the payload's bytes and the signature's base64, as the layer and
/// its annotation hold them. What the cache keeps, in a JSON list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Found {
    payload: String,
    signature: String,
}

impl Found {
    /// Which of `keys` signed this, if one did, for the manifest `digest`; else why not.
    fn verify<'k>(&self, digest: &str, keys: &'k [TrustedKey]) -> Result<&'k TrustedKey, String> {
        let payload = BASE64
            .decode(&self.payload)
            .map_err(|_| "a payload that is not base64".to_string())?;
        let der = BASE64
            .decode(self.signature.trim())
            .map_err(|_| "a signature that is not base64".to_string())?;
        let signature =
            Signature::from_der(&der).map_err(|_| "a signature that is not DER".to_string())?;
        let key = keys
            .iter()
            .find(|k| k.key.verify(&payload, &signature).is_ok())
            .ok_or_else(|| "a signature by another key".to_string())?;
        let claim: Payload = serde_json::from_slice(&payload)
            .map_err(|_| "a payload that is not simple-signing JSON".to_string())?;
        if claim.critical.kind != PAYLOAD_TYPE {
            return Err(format!("a payload of type {:?}", claim.critical.kind));
        }
        if claim.critical.image.docker_manifest_digest != digest {
            return Err(format!(
                "a signature of another manifest, {}",
                claim.critical.image.docker_manifest_digest
            ));
        }
        Ok(key)
    }
}

/// The tag cosign keeps the signatures of the manifest `digest` under: `sha256-HEX.sig`.
fn signature_tag(reference: &OciRef, digest: &str) -> OciRef {
    OciRef {
        reference: Reference::with_tag(
            reference.registry().to_string(),
            reference.reference.repository().to_string(),
            format!("{}.sig", digest.replace(':', "-")),
        ),
    }
}

/// The signature a layer of a `.sig` manifest carries, if the layer is one: of the payload
/// media type, a sha256 digest, a payload of at most [`MAX_SIGNATURE_PAYLOAD_BYTES`], and
/// an annotation that decodes to a DER signature. What a registry puts there otherwise is
/// neither fetched, nor kept, nor signed beside.
fn well_formed(layer: &OciDescriptor) -> Option<&str> {
    let signature = layer.annotations.as_ref()?.get(SIGNATURE_ANNOTATION)?;
    let payload_fits = u64::try_from(layer.size).is_ok_and(|s| s <= MAX_SIGNATURE_PAYLOAD_BYTES);
    let ok = layer.media_type == PAYLOAD_MEDIA_TYPE
        && is_sha256(&layer.digest)
        && payload_fits
        && signature.len() <= MAX_SIGNATURE_CHARS
        && BASE64
            .decode(signature.trim())
            .is_ok_and(|der| Signature::from_der(&der).is_ok());
    ok.then_some(signature.as_str())
}

/// The longest signature annotation read: an ECDSA P-256 DER signature is at most 72
/// bytes, 96 in base64.
const MAX_SIGNATURE_CHARS: usize = 128;

/// The largest cache file of signatures read: [`MAX_SIGNATURES`] of the largest.
const MAX_CACHED_SIGNATURES_BYTES: u64 =
    MAX_SIGNATURES as u64 * (MAX_SIGNATURE_PAYLOAD_BYTES * 4 / 3 + 256);

/// The cache's file of the signatures found for the manifest `digest` (a checked sha256).
fn cache_name(digest: &str) -> String {
    format!("{}.sigs", digest.replace(':', "-"))
}

impl Registry {
    /// Signs the manifest `reference` names now with `key`, adding the signature to its
    /// `sha256-….sig` manifest (made if there is none, its ill-formed layers dropped), if its
    /// layer is `expected_layer` when that is given; the
    /// signed manifest's digest and its component layer's. The manifest is fetched, and
    /// its digest is that of the bytes fetched (not a header's), and must be a component's.
    pub async fn sign(
        &self,
        reference: &OciRef,
        key: &SigningKey,
        expected_layer: Option<&str>,
    ) -> Result<(String, String), RegistryError> {
        let (manifest, digest) = self
            .client
            .pull_image_manifest(&reference.reference, &self.auth)
            .await
            .map_err(failed(reference, "pulling the manifest to sign"))?;
        let layer = super::wasm_layer(&manifest)
            .map_err(|why| RegistryError::Layout {
                reference: reference.to_string(),
                why,
            })?
            .digest
            .clone();
        if let Some(expected) = expected_layer
            && expected != layer
        {
            return Err(RegistryError::NotTheFile {
                reference: reference.to_string(),
                layer,
                file: expected.to_string(),
            });
        }
        let tag = signature_tag(reference, &digest);
        let mut layers: Vec<OciDescriptor> = match self.signatures_manifest(&tag).await? {
            Some(manifest) => manifest
                .layers
                .into_iter()
                .filter(|l| well_formed(l).is_some())
                .collect(),
            None => Vec::new(),
        };
        let payload = payload(reference, &digest);
        let signature: Signature = key.sign(&payload);
        let signature = BASE64.encode(signature.to_der().as_bytes());
        let payload_digest = digest_of(&payload);
        // Signing twice with one key gives the same signature (RFC 6979): kept once.
        if !layers.iter().any(|l| {
            l.digest == payload_digest
                && l.annotations
                    .as_ref()
                    .and_then(|a| a.get(SIGNATURE_ANNOTATION))
                    .is_some_and(|s| *s == signature)
        }) {
            layers.push(OciDescriptor {
                media_type: PAYLOAD_MEDIA_TYPE.to_string(),
                digest: payload_digest.clone(),
                size: payload.len() as i64,
                annotations: Some(BTreeMap::from([(
                    SIGNATURE_ANNOTATION.to_string(),
                    signature,
                )])),
                ..Default::default()
            });
        }
        let r = &tag.reference;
        self.client
            .auth(r, &self.auth, RegistryOperation::Push)
            .await
            .map_err(failed(reference, "signing in"))?;
        self.client
            .push_blob(r, payload, &payload_digest)
            .await
            .map_err(failed(reference, "pushing the signature's payload"))?;
        // The config cosign gives a signature image: the payloads as its layers' diff ids.
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "",
            "created": "0001-01-01T00:00:00Z",
            "history": [{"created": "0001-01-01T00:00:00Z"}],
            "os": "",
            "rootfs": {
                "type": "layers",
                "diff_ids": layers.iter().map(|l| &l.digest).collect::<Vec<_>>(),
            },
            "config": {},
        }))
        .expect("a config serializes");
        self.push_image(&tag, IMAGE_CONFIG_MEDIA_TYPE, config, layers)
            .await?;
        Ok((digest, layer))
    }

    /// The manifest of the signatures tag `tag`, or `None` when there is none.
    async fn signatures_manifest(
        &self,
        tag: &OciRef,
    ) -> Result<Option<OciImageManifest>, RegistryError> {
        match self
            .client
            .pull_image_manifest(&tag.reference, &self.auth)
            .await
        {
            Ok((manifest, _)) => Ok(Some(manifest)),
            Err(OciDistributionError::ImageManifestNotFoundError(_)) => Ok(None),
            Err(OciDistributionError::RegistryError { envelope, .. })
                if envelope
                    .errors
                    .iter()
                    .any(|e| e.code == OciErrorCode::ManifestUnknown) =>
            {
                Ok(None)
            }
            Err(source) => Err(RegistryError::Distribution {
                reference: tag.to_string(),
                stage: "pulling its signatures",
                source,
            }),
        }
    }

    /// The signatures the registry holds for the manifest `digest` of `reference`: the
    /// newest [`MAX_SIGNATURES`] well-formed ones ([`well_formed`]). A layer whose payload
    /// cannot be had is passed over, so that one bad layer does not hide the others.
    async fn signatures(
        &self,
        reference: &OciRef,
        digest: &str,
    ) -> Result<Vec<Found>, RegistryError> {
        let tag = signature_tag(reference, digest);
        let Some(manifest) = self.signatures_manifest(&tag).await? else {
            return Ok(Vec::new());
        };
        let mut found = Vec::new();
        let layers = manifest
            .layers
            .iter()
            .rev()
            .filter_map(|l| Some((l, well_formed(l)?)));
        for (layer, signature) in layers.take(MAX_SIGNATURES) {
            match self.blob(&tag, layer, "pulling a signature").await {
                Ok(payload) => found.push(Found {
                    payload: BASE64.encode(payload),
                    signature: signature.to_string(),
                }),
                Err(e) => {
                    tracing::debug!(component = %reference, error = %e, "a signature's payload is passed over")
                }
            }
        }
        Ok(found)
    }
}

/// Checks that the manifest `digest` of `reference` is signed by one of `keys`: with the
/// signatures the cache holds for it, else (or when none of those verifies) with the
/// registry's, which the cache then keeps if one of them verifies. `registry` is `None`
/// when the registry cannot
/// be asked (a pinned component loaded offline). The key that signed it.
pub async fn verify<'k>(
    reference: &OciRef,
    digest: &str,
    keys: &'k [TrustedKey],
    cache: &Path,
    registry: Option<&Registry>,
) -> Result<&'k TrustedKey, RegistryError> {
    let refused = |why: String| RegistryError::Unsigned {
        reference: reference.to_string(),
        digest: digest.to_string(),
        keys: keys
            .iter()
            .map(|k| k.file.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        why,
    };
    if !is_sha256(digest) {
        return Err(refused(format!("its digest {digest:?} is not sha256")));
    }
    let file = cache.join(cache_name(digest));
    let kept: Vec<Found> = std::fs::metadata(&file)
        .is_ok_and(|m| m.len() <= MAX_CACHED_SIGNATURES_BYTES)
        .then(|| std::fs::read(&file).ok())
        .flatten()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    if let Some(key) = kept.iter().find_map(|f| f.verify(digest, keys).ok()) {
        return Ok(key);
    }
    let cached = match kept.len() {
        0 => "no signature of it is cached".to_string(),
        n => format!("none of the {n} signatures cached verifies"),
    };
    let Some(registry) = registry else {
        return Err(refused(cached));
    };
    let found = registry
        .signatures(reference, digest)
        .await
        .map_err(|e| refused(format!("{cached}, and the registry cannot be asked: {e}")))?;
    let mut reasons = Vec::new();
    for signature in &found {
        match signature.verify(digest, keys) {
            Ok(key) => {
                // Kept only when one verifies: a registry cannot replace signatures that
                // verify offline with ones that do not.
                if found != kept {
                    let json = serde_json::to_vec(&found).expect("signatures serialize");
                    write_whole(cache, &file, &json)?;
                }
                return Ok(key);
            }
            Err(why) => reasons.push(why),
        }
    }
    Err(refused(if found.is_empty() {
        format!(
            "it is not signed (no {} in its repository)",
            signature_tag(reference, digest)
                .reference
                .tag()
                .unwrap_or_default()
        )
    } else {
        reasons.sort();
        reasons.dedup();
        format!(
            "{} signature(s), none verifies: {}",
            found.len(),
            reasons.join("; ")
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_pair(seed: u8) -> (SigningKey, Vec<TrustedKey>) {
        let signing = SigningKey::from_slice(&[seed; 32]).unwrap();
        let trusted = TrustedKey {
            file: format!("key{seed}.pub"),
            key: *signing.verifying_key(),
        };
        (signing, vec![trusted])
    }

    fn signed(key: &SigningKey, payload: &[u8]) -> Found {
        let signature: Signature = key.sign(payload);
        Found {
            payload: BASE64.encode(payload),
            signature: BASE64.encode(signature.to_der().as_bytes()),
        }
    }

    #[test]
    fn a_signature_verifies_with_its_key_for_its_manifest_only() {
        let reference = OciRef::parse("oci://127.0.0.1:5000/hooks/audit:1").unwrap();
        let digest = format!("sha256:{}", "a".repeat(64));
        let other = format!("sha256:{}", "b".repeat(64));
        let (key, trusted) = key_pair(1);
        let (_, stranger) = key_pair(2);
        let found = signed(&key, &payload(&reference, &digest));
        assert_eq!(found.verify(&digest, &trusted).unwrap().file, "key1.pub");
        let by_another = found.verify(&digest, &stranger).unwrap_err();
        assert!(by_another.contains("another key"), "{by_another}");
        let moved = found.verify(&other, &trusted).unwrap_err();
        assert!(moved.contains("another manifest"), "{moved}");
        // One byte of the payload changed: the signature no longer holds.
        let mut bytes = payload(&reference, &digest);
        let last = bytes.len() - 2;
        bytes[last] ^= 1;
        let tampered = Found {
            payload: BASE64.encode(&bytes),
            ..found
        };
        assert!(tampered.verify(&digest, &trusted).is_err());
    }

    #[test]
    fn the_payload_is_cosigns_simple_signing_form() {
        let reference = OciRef::parse("oci://localhost:5000/a/b:v1").unwrap();
        let digest = format!("sha256:{}", "c".repeat(64));
        let text = String::from_utf8(payload(&reference, &digest)).unwrap();
        assert_eq!(
            text,
            format!(
                r#"{{"critical":{{"identity":{{"docker-reference":"localhost:5000/a/b"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
            )
        );
        assert_eq!(
            signature_tag(&reference, &digest).to_string(),
            format!("oci://localhost:5000/a/b:sha256-{}.sig", "c".repeat(64))
        );
    }
}
