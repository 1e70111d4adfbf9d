//! Components from OCI registries: `oci://REGISTRY/REPOSITORY:TAG` or
//! `oci://REGISTRY/REPOSITORY@sha256:DIGEST`, pushed and pulled in the CNCF Wasm OCI
//! artifact layout that `wkg oci push` writes and `wkg oci pull` reads: an image manifest
//! whose config is [`WASM_CONFIG_MEDIA_TYPE`] (`architecture` `wasm`, `os` `wasip2`, the
//! layer's digest in `layerDigests`) and whose one layer, [`WASM_LAYER_MEDIA_TYPE`], is the
//! component's bytes.
//!
//! The registry client is `oci-client`. What this module adds is the layout, and what a
//! registry is not trusted with:
//! - a manifest pulled by digest is checked against that digest (by `oci-client`), and a
//!   layer against the digest its manifest names (by `oci-client` while streaming, and here
//!   again over the bytes kept);
//! - a layer larger than [`MAX_PULLED_COMPONENT_BYTES`] is refused from the manifest's
//!   size, and a registry that sends more than it announced is cut off at that size;
//! - plain HTTP only to a loopback registry, or to one the caller names
//!   ([`Registry::connect`]);
//! - credentials never appear in a message or a log.

mod signature;

pub use signature::{
    TrustedKey, read_keys, read_signers, read_signing_key, verify as verify_signature,
};

use crate::limits::MAX_PULLED_COMPONENT_BYTES;
use futures_util::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The config media type of a Wasm component artifact (CNCF TAG-Runtime's layout).
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";
/// The media type of its one layer: the component's bytes.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The scheme that marks a component reference as a registry's.
pub const SCHEME: &str = "oci://";
/// The environment variables that give one registry (`host[:port]`) its credentials,
/// over the Docker config file's: all three, or none.
pub const HOST_VAR: &str = "HOOKHOST_REGISTRY_HOST";
pub const USERNAME_VAR: &str = "HOOKHOST_REGISTRY_USERNAME";
pub const PASSWORD_VAR: &str = "HOOKHOST_REGISTRY_PASSWORD";

/// Why a registry operation failed; each names the reference.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(
        "{reference:?} is not a registry reference: {why} (expected oci://REGISTRY/REPOSITORY:TAG or oci://REGISTRY/REPOSITORY@sha256:DIGEST)"
    )]
    Reference { reference: String, why: String },
    #[error(
        "{reference}: plain HTTP is allowed only to a loopback registry unless it is named: `--insecure {registry}`"
    )]
    PlainHttp { reference: String, registry: String },
    #[error("{reference}: {stage}: {source}")]
    Distribution {
        reference: String,
        stage: &'static str,
        #[source]
        source: oci_client::errors::OciDistributionError,
    },
    #[error("{reference}: not a Wasm component artifact: {why}")]
    Layout { reference: String, why: String },
    #[error(
        "{reference}: the component is {size} bytes, more than the {max} a pulled component may be"
    )]
    TooLarge {
        reference: String,
        size: u64,
        max: u64,
    },
    #[error(
        "{reference}: the tag now names {now}, not the pinned {pinned}: pin the new digest if it is meant, or put the tag back"
    )]
    Moved {
        reference: String,
        pinned: String,
        now: String,
    },
    #[error("{reference}: the layer's bytes do not hash to its digest {digest}")]
    Tampered { reference: String, digest: String },
    #[error("{reference}: the registry took more than {after:?}")]
    TimedOut {
        reference: String,
        after: std::time::Duration,
    },
    #[error("{reference}: refused: {digest} is not signed by {keys}: {why}")]
    Unsigned {
        reference: String,
        digest: String,
        /// The key files required, one of which must have signed it.
        keys: String,
        why: String,
    },
    #[error("{file}: {why}")]
    Key { file: String, why: String },
    #[error("{reference}: not signed: its component is {layer}, not the file given ({file})")]
    NotTheFile {
        reference: String,
        layer: String,
        file: String,
    },
    #[error("{reference}: credentials: {why}")]
    Credentials { reference: String, why: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// A component's place in a registry, as `oci://…` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciRef {
    reference: Reference,
}

impl OciRef {
    /// Parses `oci://REGISTRY/REPOSITORY(:TAG|@sha256:DIGEST)`. The registry must be named
    /// (a host with a dot or a port, or `localhost`): no Docker Hub default. A reference
    /// with neither tag nor digest is refused rather than read as `latest`.
    pub fn parse(text: &str) -> Result<OciRef, RegistryError> {
        let refused = |why: &str| RegistryError::Reference {
            reference: text.to_string(),
            why: why.to_string(),
        };
        let rest = text
            .strip_prefix(SCHEME)
            .ok_or_else(|| refused("it does not start with oci://"))?;
        if rest
            .split('/')
            .next()
            .is_some_and(|host| host.contains('@'))
        {
            // `oci://user:token@host/…`: said without the text, which may hold a secret.
            return Err(RegistryError::Reference {
                reference: format!("{SCHEME}…"),
                why: "credentials do not go in a reference (see [registries])".into(),
            });
        }
        let (host, path) = rest
            .split_once('/')
            .ok_or_else(|| refused("no repository after the registry"))?;
        if !(host.contains('.') || host.contains(':') || host == "localhost") {
            return Err(refused(
                "the registry must be a host with a dot or a port, or localhost",
            ));
        }
        // Read here rather than by oci-spec's parser, which compiles a large regex at its
        // first use: 20 ms of a start that loads four registry hooks (`perf record`).
        let (name, digest) = match path.split_once('@') {
            Some((name, digest)) => (name, Some(digest)),
            None => (path, None),
        };
        let (repository, tag) = match name.rsplit_once(':') {
            Some((repository, tag)) if !tag.contains('/') => (repository, Some(tag)),
            _ => (name, None),
        };
        // One spelling per registry, so that a `[registries."HOST"]` rule cannot be passed
        // by another (`Registry.Example.com.`, `:0443`): lowercase, no final dot, the port
        // as a number, and HTTPS's 443 left out.
        let (name, port) = match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        };
        let name_ok = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        let port_ok = port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
        if !(name_ok && port_ok) {
            return Err(refused("the registry is not a host[:port]"));
        }
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let registry = match port.map(str::parse::<u16>) {
            None | Some(Ok(443)) => name,
            Some(Ok(port)) => format!("{name}:{port}"),
            Some(Err(_)) => return Err(refused("the registry's port is not a port")),
        };
        let component_ok = |c: &str| {
            let bytes = c.as_bytes();
            !c.is_empty()
                && bytes[0].is_ascii_alphanumeric()
                && bytes[bytes.len() - 1].is_ascii_alphanumeric()
                && !c.contains("..")
                && bytes.iter().all(|&b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
                })
        };
        if repository.len() > 255 || !repository.split('/').all(component_ok) {
            return Err(refused(
                "the repository is not lowercase letters, digits and . _ - between slashes",
            ));
        }
        let tag_ok = |t: &str| {
            (1..=128).contains(&t.len())
                && (t.as_bytes()[0].is_ascii_alphanumeric() || t.starts_with('_'))
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        };
        let repository = repository.to_string();
        let reference = match (tag, digest) {
            (_, Some(d)) if !is_sha256(d) => {
                return Err(refused("the digest is not sha256: and 64 hex digits"));
            }
            (Some(t), _) if !tag_ok(t) => return Err(refused("the tag is not a tag")),
            (None, None) => return Err(refused("no tag and no digest")),
            (Some(t), None) => Reference::with_tag(registry, repository, t.to_string()),
            (None, Some(d)) => Reference::with_digest(registry, repository, d.to_string()),
            (Some(t), Some(d)) => {
                Reference::with_tag_and_digest(registry, repository, t.to_string(), d.to_string())
            }
        };
        Ok(OciRef { reference })
    }

    /// The registry, `host[:port]`.
    pub fn registry(&self) -> &str {
        self.reference.registry()
    }

    /// The digest it pins, `sha256:…`, if any.
    pub fn digest(&self) -> Option<&str> {
        self.reference.digest()
    }

    /// The same repository at `digest`.
    pub fn at(&self, digest: &str) -> OciRef {
        OciRef {
            reference: Reference::with_digest(
                self.reference.registry().to_string(),
                self.reference.repository().to_string(),
                digest.to_string(),
            ),
        }
    }

    /// Whether its registry is this machine: `localhost`, or a loopback address.
    pub fn is_loopback(&self) -> bool {
        let host = self.host();
        host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// The registry's host, without its port.
    fn host(&self) -> &str {
        let registry = self.registry();
        registry.rsplit_once(':').map_or(registry, |(host, _)| host)
    }
}

impl fmt::Display for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}", self.reference.whole())
    }
}

/// Where the components pulled into `data` (a data directory) are kept, by layer digest.
pub fn cache_dir(data: &Path) -> PathBuf {
    data.join(crate::runtime::CACHE_DIR).join("oci")
}

/// A component pulled: where its bytes are, and the digests that name them.
#[derive(Debug, Clone)]
pub struct Pulled {
    /// The manifest's digest: what the reference resolved to, and what a signature signs.
    pub manifest: String,
    /// The layer's digest: the SHA-256 of the component's bytes.
    pub layer: String,
    /// The component, in the data directory's registry cache.
    pub path: PathBuf,
    /// The key files whose signatures were verified, one of each set required.
    pub signed_by: Vec<String>,
}

/// Where plain HTTP is allowed ([`Registry::connect`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlainHttp<'a> {
    /// HTTPS only.
    Never,
    /// To the registry if it is this machine (`localhost`, a loopback address); another is
    /// refused rather than reached over HTTPS, so that a mistake is said.
    Loopback,
    /// To this registry (`host[:port]`) and no other.
    To(&'a str),
}

/// A user and password a config gives a registry (`[registries."HOST"]`, resolved).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: crate::secret::Secret,
    pub password: crate::secret::Secret,
}

/// What a config says of its registries (`[registries."HOST"]`), by `host[:port]`.
#[derive(Debug, Clone, Default)]
pub struct Registries {
    /// Reached over plain HTTP (`insecure`).
    pub insecure: Vec<String>,
    /// Their credentials (`username`, `password`).
    pub credentials: BTreeMap<String, Credentials>,
    /// The keys every component of one must be signed by (`require_signature`).
    pub signers: BTreeMap<String, Vec<PathBuf>>,
}

impl Registries {
    /// A client for `reference`'s registry, as the config says to reach it.
    pub fn connect(&self, reference: &OciRef) -> Result<Registry, RegistryError> {
        let registry = reference.registry();
        let plain = match self.insecure.iter().any(|r| r == registry) {
            true => PlainHttp::To(registry),
            false => PlainHttp::Never,
        };
        Registry::connect(reference, plain, self.credentials.get(registry))
    }
}

/// A connection to one registry, with the credentials it is given.
pub struct Registry {
    client: Client,
    auth: RegistryAuth,
}

impl Registry {
    /// A client for `reference`'s registry: HTTPS unless `plain` allows plain HTTP to it.
    /// Credentials: `given` (a config's `[registries."HOST"]`), else [`USERNAME_VAR`] and
    /// [`PASSWORD_VAR`] when [`HOST_VAR`] names this registry, else the Docker config file
    /// (`$DOCKER_CONFIG/config.json`, `~/.docker/config.json`), else none.
    pub fn connect(
        reference: &OciRef,
        plain: PlainHttp<'_>,
        given: Option<&Credentials>,
    ) -> Result<Registry, RegistryError> {
        crate::crypto::install_crypto_provider();
        let registry = reference.registry().to_string();
        let plain = match plain {
            PlainHttp::Never => false,
            PlainHttp::To(named) => named == registry,
            PlainHttp::Loopback if reference.is_loopback() => true,
            PlainHttp::Loopback => {
                return Err(RegistryError::PlainHttp {
                    reference: reference.to_string(),
                    registry,
                });
            }
        };
        let protocol = if plain {
            ClientProtocol::HttpsExcept(vec![registry])
        } else {
            ClientProtocol::Https
        };
        let client = Client::try_from(ClientConfig {
            protocol,
            // An index (a list of images by platform) is not a component.
            platform_resolver: None,
            connect_timeout: Some(crate::limits::REGISTRY_CONNECT_TIMEOUT),
            read_timeout: Some(crate::limits::REGISTRY_READ_TIMEOUT),
            user_agent: concat!("hookhost/", env!("CARGO_PKG_VERSION")),
            ..Default::default()
        })
        .map_err(|source| RegistryError::Distribution {
            reference: reference.to_string(),
            stage: "making the client",
            source,
        })?;
        let auth = match given {
            Some(given) => RegistryAuth::Basic(
                given.username.expose().to_string(),
                given.password.expose().to_string(),
            ),
            None => credentials(reference)?,
        };
        Ok(Registry { client, auth })
    }

    /// Pushes `wasm` to `reference` in the Wasm artifact layout, its layer titled `title`
    /// (the file's name); the manifest's digest.
    pub async fn push(
        &self,
        reference: &OciRef,
        wasm: Vec<u8>,
        title: &str,
    ) -> Result<String, RegistryError> {
        let r = &reference.reference;
        self.client
            .auth(r, &self.auth, RegistryOperation::Push)
            .await
            .map_err(failed(reference, "signing in"))?;
        let layer = digest_of(&wasm);
        let config = serde_json::to_vec(&serde_json::json!({
            "created": humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [layer],
        }))
        .expect("a config serializes");
        let layers = vec![OciDescriptor {
            media_type: WASM_LAYER_MEDIA_TYPE.to_string(),
            digest: layer.clone(),
            size: wasm.len() as i64,
            annotations: Some(BTreeMap::from([(
                "org.opencontainers.image.title".to_string(),
                title.to_string(),
            )])),
            ..Default::default()
        }];
        self.client
            .push_blob(r, wasm, &layer)
            .await
            .map_err(failed(reference, "pushing the component"))?;
        self.push_image(reference, WASM_CONFIG_MEDIA_TYPE, config, layers)
            .await
    }

    /// Pushes an image manifest of `layers` (pushed before) and `config` to `reference`;
    /// the manifest's digest.
    async fn push_image(
        &self,
        reference: &OciRef,
        config_media_type: &str,
        config: Vec<u8>,
        layers: Vec<OciDescriptor>,
    ) -> Result<String, RegistryError> {
        let r = &reference.reference;
        let manifest = OciImageManifest {
            media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_string()),
            config: OciDescriptor {
                media_type: config_media_type.to_string(),
                digest: digest_of(&config),
                size: config.len() as i64,
                ..Default::default()
            },
            layers,
            ..Default::default()
        };
        let config_digest = manifest.config.digest.clone();
        self.client
            .push_blob(r, config, &config_digest)
            .await
            .map_err(failed(reference, "pushing the config"))?;
        // Serialized here, so that the digest returned is of the very bytes pushed.
        let body = serde_json::to_vec(&manifest).expect("a manifest serializes");
        let digest = digest_of(&body);
        self.client
            .push_manifest_raw(
                r,
                body,
                reqwest::header::HeaderValue::from_static(OCI_IMAGE_MEDIA_TYPE),
            )
            .await
            .map_err(failed(reference, "pushing the manifest"))?;
        Ok(digest)
    }

    /// The blob `layer` describes, of `reference`'s repository: from the registry, never
    /// from the `urls` a descriptor may list (a registry would have the host fetch whatever
    /// it names); cut off past the size the descriptor announces, and hashing to its digest.
    /// `stage` says what it is, in an error.
    async fn blob(
        &self,
        reference: &OciRef,
        layer: &OciDescriptor,
        stage: &'static str,
    ) -> Result<Vec<u8>, RegistryError> {
        let tampered = || RegistryError::Tampered {
            reference: reference.to_string(),
            digest: layer.digest.clone(),
        };
        let size = u64::try_from(layer.size).unwrap_or(0);
        let from_registry = OciDescriptor {
            urls: None,
            ..layer.clone()
        };
        let mut stream = self
            .client
            .pull_blob_stream(&reference.reference, &from_registry)
            .await
            .map_err(failed(reference, stage))?
            .stream;
        let mut bytes = Vec::with_capacity(size as usize);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|source| RegistryError::Io {
                path: reference.to_string(),
                source,
            })?;
            if (bytes.len() + chunk.len()) as u64 > size {
                return Err(tampered());
            }
            bytes.extend_from_slice(&chunk);
        }
        if digest_of(&bytes) != layer.digest {
            return Err(tampered());
        }
        Ok(bytes)
    }

    /// The manifest digest `reference` resolves to now (a tag's current one; a digest's
    /// own, once the registry has it).
    pub async fn resolve(&self, reference: &OciRef) -> Result<String, RegistryError> {
        self.client
            .fetch_manifest_digest(&reference.reference, &self.auth)
            .await
            .map_err(|source| RegistryError::Distribution {
                reference: reference.to_string(),
                stage: "resolving",
                source,
            })
    }

    /// Pulls the component `reference` names into `cache` (a directory; its file is named
    /// by the layer's digest, written whole or not at all).
    pub async fn pull(&self, reference: &OciRef, cache: &Path) -> Result<Pulled, RegistryError> {
        let named = reference.to_string();
        let r = &reference.reference;
        let (manifest, manifest_digest) = self
            .client
            .pull_image_manifest(r, &self.auth)
            .await
            .map_err(failed(reference, "pulling the manifest"))?;
        let layer = wasm_layer(&manifest).map_err(|why| RegistryError::Layout {
            reference: named.clone(),
            why,
        })?;
        let size = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if size > MAX_PULLED_COMPONENT_BYTES {
            return Err(RegistryError::TooLarge {
                reference: named,
                size,
                max: MAX_PULLED_COMPONENT_BYTES,
            });
        }
        let path = cache.join(cache_name(&layer.digest));
        let whole = std::fs::read(&path).is_ok_and(|bytes| digest_of(&bytes) == layer.digest);
        if !whole {
            let bytes = self.blob(reference, layer, "pulling the component").await?;
            write_whole(cache, &path, &bytes)?;
        }
        if is_sha256(&manifest_digest) {
            let record = cache.join(manifest_name(&manifest_digest));
            write_whole(cache, &record, layer.digest.as_bytes())?;
        }
        Ok(Pulled {
            manifest: manifest_digest,
            layer: layer.digest.clone(),
            path,
            signed_by: Vec::new(),
        })
    }
}

/// A distribution error of `reference` at `stage`, for `map_err`.
fn failed<'a>(
    reference: &'a OciRef,
    stage: &'static str,
) -> impl FnOnce(oci_client::errors::OciDistributionError) -> RegistryError + 'a {
    move |source| RegistryError::Distribution {
        reference: reference.to_string(),
        stage,
        source,
    }
}

/// The component `reference` names, in the cache of `data` (a data directory), its registry
/// reached as `registries` says:
/// - pinned by digest and pulled before: taken from the cache, the registry not asked (a
///   host runs offline on what it pulled);
/// - by tag: resolved now, and logged with the digest it resolved to;
/// - with a tag and a digest both: refused, both digests named, when the tag names another
///   manifest now; taken from the cache when the registry cannot be reached.
///
/// Then, for each of `signers` (the key sets a config requires), it must be signed by one
/// of the set's keys (see [`signature`]): checked with the signatures the cache holds, else
/// the registry's. Nothing of it is loaded before.
pub async fn fetch(
    reference: &OciRef,
    data: &Path,
    registries: &Registries,
    signers: &[Vec<TrustedKey>],
) -> Result<Pulled, RegistryError> {
    let bound = crate::limits::REGISTRY_FETCH_TIMEOUT;
    tokio::time::timeout(bound, async {
        let cache = cache_dir(data);
        let connect = || registries.connect(reference);
        let (mut pulled, mut registry) = fetch_component(reference, &cache, connect).await?;
        for keys in signers {
            let key = match signature::verify(reference, &pulled.manifest, keys, &cache, None).await {
                Ok(key) => key,
                Err(offline) => {
                    let registry = match &mut registry {
                        Some(registry) => registry,
                        // Pinned and cached: the registry is asked for newer signatures.
                        None => registry.insert(connect().map_err(|_| offline)?),
                    };
                    signature::verify(reference, &pulled.manifest, keys, &cache, Some(registry))
                        .await?
                }
            };
            tracing::info!(component = %reference, digest = %pulled.manifest, key = %key.file, "signature verified");
            pulled.signed_by.push(key.file.clone());
        }
        Ok(pulled)
    })
    .await
    .unwrap_or_else(|_| {
        Err(RegistryError::TimedOut {
            reference: reference.to_string(),
            after: bound,
        })
    })
}

/// The component, from the cache or the registry (see [`fetch`]), and the registry when it
/// was asked.
async fn fetch_component(
    reference: &OciRef,
    cache: &Path,
    connect: impl Fn() -> Result<Registry, RegistryError>,
) -> Result<(Pulled, Option<Registry>), RegistryError> {
    let pinned = reference.digest().and_then(|d| cached(cache, d));
    let tag = reference.reference.tag();
    if let Some(pulled) = &pinned
        && tag.is_none()
    {
        return Ok((pulled.clone(), None));
    }
    let registry = connect()?;
    if let (Some(tag), Some(digest)) = (tag, reference.digest()) {
        let by_tag = OciRef {
            reference: Reference::with_tag(
                reference.registry().to_string(),
                reference.reference.repository().to_string(),
                tag.to_string(),
            ),
        };
        match registry.resolve(&by_tag).await {
            Ok(now) if now != digest => {
                return Err(RegistryError::Moved {
                    reference: reference.to_string(),
                    pinned: digest.to_string(),
                    now,
                });
            }
            Ok(_) => {}
            Err(e) => match pinned {
                Some(pulled) => {
                    tracing::warn!(component = %reference, error = %e, "cannot check the tag: the cached copy of the pinned digest is used");
                    return Ok((pulled, None));
                }
                None => return Err(e),
            },
        }
        if let Some(pulled) = pinned {
            return Ok((pulled, Some(registry)));
        }
    }
    let pulled = registry.pull(reference, cache).await?;
    tracing::info!(component = %reference, digest = %pulled.manifest, layer = %pulled.layer, "pulled from its registry");
    Ok((pulled, Some(registry)))
}

/// What the cache holds of the manifest `digest`: its component, pulled before.
fn cached(cache: &Path, digest: &str) -> Option<Pulled> {
    if !is_sha256(digest) {
        return None;
    }
    let layer = std::fs::read_to_string(cache.join(manifest_name(digest))).ok()?;
    let layer = layer.trim();
    if !is_sha256(layer) {
        return None;
    }
    let path = cache.join(cache_name(layer));
    path.is_file().then(|| Pulled {
        manifest: digest.to_string(),
        layer: layer.to_string(),
        path,
        signed_by: Vec::new(),
    })
}

/// The cache's file naming the layer of the manifest `digest` (checked by [`is_sha256`]).
fn manifest_name(digest: &str) -> String {
    format!("{}.manifest", digest.replace(':', "-"))
}

/// The one `application/wasm` layer of a Wasm component artifact's manifest.
fn wasm_layer(manifest: &OciImageManifest) -> Result<&OciDescriptor, String> {
    if manifest
        .media_type
        .as_deref()
        .is_some_and(|t| t != OCI_IMAGE_MEDIA_TYPE)
    {
        return Err(format!("its manifest is {:?}", manifest.media_type));
    }
    if manifest.config.media_type != WASM_CONFIG_MEDIA_TYPE {
        return Err(format!(
            "its config is {:?}, not {WASM_CONFIG_MEDIA_TYPE:?}",
            manifest.config.media_type
        ));
    }
    match &manifest.layers[..] {
        [layer] if layer.media_type == WASM_LAYER_MEDIA_TYPE => {
            if !is_sha256(&layer.digest) {
                return Err(format!(
                    "its layer's digest {:?} is not sha256",
                    layer.digest
                ));
            }
            Ok(layer)
        }
        [layer] => Err(format!(
            "its layer is {:?}, not {WASM_LAYER_MEDIA_TYPE:?}",
            layer.media_type
        )),
        layers => Err(format!("it has {} layers, not one", layers.len())),
    }
}

/// `sha256:` and 64 lowercase hex digits: what may name a file in the cache.
fn is_sha256(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// The cache's file name for a layer of `digest` (checked by [`is_sha256`]).
fn cache_name(digest: &str) -> String {
    format!("{}.wasm", digest.replace(':', "-"))
}

/// `sha256:` and the hex SHA-256 of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", crate::ids::hex(&Sha256::digest(bytes)))
}

/// Writes `bytes` to `path` in `dir` through a temporary file renamed into place.
fn write_whole(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), RegistryError> {
    let io = |source| RegistryError::Io {
        path: path.display().to_string(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut file = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    std::io::Write::write_all(&mut file, bytes).map_err(io)?;
    file.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// The credentials for `reference`'s registry: the environment's, else the Docker config
/// file's `auths` entry for it, else anonymous.
fn credentials(reference: &OciRef) -> Result<RegistryAuth, RegistryError> {
    let refused = |why: String| RegistryError::Credentials {
        reference: reference.to_string(),
        why,
    };
    let registry = reference.registry();
    // The environment's pair is for the one registry it names: a reference copied from
    // a README must not have the host send them to whatever registry it names.
    let vars = [HOST_VAR, USERNAME_VAR, PASSWORD_VAR].map(|v| std::env::var(v).ok());
    match vars {
        [Some(host), Some(user), Some(password)] if host == registry => {
            return Ok(RegistryAuth::Basic(user, password));
        }
        [Some(_), Some(_), Some(_)] | [None, None, None] => {}
        _ => {
            return Err(refused(format!(
                "{HOST_VAR}, {USERNAME_VAR} and {PASSWORD_VAR} go together"
            )));
        }
    }
    let file = match std::env::var_os("DOCKER_CONFIG") {
        Some(dir) => PathBuf::from(dir).join("config.json"),
        None => match std::env::var_os("HOME") {
            Some(home) => PathBuf::from(home).join(".docker/config.json"),
            None => return Ok(RegistryAuth::Anonymous),
        },
    };
    let Ok(text) = std::fs::read(&file) else {
        return Ok(RegistryAuth::Anonymous);
    };
    // Read as values, so that another registry's odd entry neither stops this one nor
    // reaches a message (serde quotes the values it cannot take).
    let config: serde_json::Value = serde_json::from_slice(&text).map_err(|e| {
        refused(format!(
            "{} is not JSON (line {}, column {})",
            file.display(),
            e.line(),
            e.column()
        ))
    })?;
    let entry = config
        .get("auths")
        .and_then(|a| a.as_object())
        .and_then(|auths| {
            auths.iter().find(|(key, _)| {
                let key = key
                    .strip_prefix("https://")
                    .or_else(|| key.strip_prefix("http://"))
                    .unwrap_or(key);
                key.trim_end_matches('/') == registry
            })
        });
    let Some(encoded) = entry.and_then(|(_, a)| a.get("auth")?.as_str()) else {
        return Ok(RegistryAuth::Anonymous);
    };
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()
        .and_then(|d| String::from_utf8(d).ok());
    let Some((user, password)) = decoded.as_deref().and_then(|d| d.split_once(':')) else {
        return Err(refused(format!(
            "{}: {registry}'s auth is not base64 of USER:PASSWORD",
            file.display()
        )));
    };
    Ok(RegistryAuth::Basic(user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_a_registry_and_a_tag_or_digest() {
        let tagged = OciRef::parse("oci://127.0.0.1:5000/hooks/audit:v1").unwrap();
        assert_eq!(tagged.registry(), "127.0.0.1:5000");
        assert!(tagged.is_loopback() && tagged.digest().is_none());
        assert_eq!(tagged.to_string(), "oci://127.0.0.1:5000/hooks/audit:v1");
        let digest = format!("sha256:{}", "a".repeat(64));
        let pinned = OciRef::parse(&format!("oci://ghcr.io/acme/audit@{digest}")).unwrap();
        assert_eq!(pinned.digest(), Some(digest.as_str()));
        assert!(!pinned.is_loopback());
        assert_eq!(tagged.at(&digest).digest(), Some(digest.as_str()));
        for bad in [
            "127.0.0.1:5000/hooks/audit:v1",
            "oci://hooks/audit:v1",
            "oci://127.0.0.1:5000/hooks/audit",
            "oci://127.0.0.1:5000/Hooks/audit:v1",
            "oci://127.0.0.1:5000/hooks/audit@sha256:short",
            "oci://127.0.0.1:5000",
            "oci://127.0.0.1:5000/hooks//audit:v1",
            "oci://127.0.0.1:5000/hooks/audit:-v1",
            "oci://127.0.0.1:5000/hooks/au..dit:v1",
            "oci://127.0.0.1:x/hooks/audit:v1",
            "oci://a b.io/hooks/audit:v1",
            "oci://127.0.0.1:70000/hooks/audit:v1",
        ] {
            assert!(OciRef::parse(bad).is_err(), "{bad}");
        }
        // One spelling per registry: what `[registries."HOST"]` rules are looked up by.
        for spelling in [
            "Registry.Example.COM",
            "registry.example.com.",
            "registry.example.com:443",
            "registry.example.com:0443",
        ] {
            let reference = OciRef::parse(&format!("oci://{spelling}/a/b:v1")).unwrap();
            assert_eq!(reference.registry(), "registry.example.com", "{spelling}");
        }
        let port = OciRef::parse("oci://LOCALHOST:05000/a/b:v1").unwrap();
        assert_eq!(port.registry(), "localhost:5000");
    }

    #[test]
    fn only_one_wasm_layer_with_a_sha256_digest_is_a_component() {
        let layer = |media: &str, digest: &str| OciDescriptor {
            media_type: media.into(),
            digest: digest.into(),
            size: 1,
            ..Default::default()
        };
        let good = format!("sha256:{}", "0".repeat(64));
        let manifest = |layers| OciImageManifest {
            media_type: Some(OCI_IMAGE_MEDIA_TYPE.into()),
            config: layer(WASM_CONFIG_MEDIA_TYPE, &good),
            layers,
            ..Default::default()
        };
        assert!(wasm_layer(&manifest(vec![layer(WASM_LAYER_MEDIA_TYPE, &good)])).is_ok());
        for layers in [
            vec![],
            vec![layer("application/vnd.oci.image.layer.v1.tar", &good)],
            vec![layer(WASM_LAYER_MEDIA_TYPE, "sha256:../../etc/passwd")],
            vec![
                layer(WASM_LAYER_MEDIA_TYPE, &good),
                layer(WASM_LAYER_MEDIA_TYPE, &good),
            ],
        ] {
            assert!(wasm_layer(&manifest(layers)).is_err());
        }
        let mut other = manifest(vec![layer(WASM_LAYER_MEDIA_TYPE, &good)]);
        other.config.media_type = "application/vnd.oci.image.config.v1+json".into();
        assert!(wasm_layer(&other).is_err());
    }
}
