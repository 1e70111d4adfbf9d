//! Secrets of the config — tenants' tokens, the session store's URL, upstreams'
//! environments and headers — and where they may come from: `${NAME}`, the host's
//! environment variable `NAME`, and `${file:PATH}`, a file's contents (a mounted secret).
//!
//! Security rule: a [`Secret`] is compared and handed on, never printed (its `Debug` says
//! `Secret(…)`); [`expand`]'s errors name a variable or a file, never a value; a tenant's
//! token is kept as its SHA-256 only ([`TokenDigest`]).

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// A secret from the config: compared, never printed.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The secret with its `${NAME}` and `${file:PATH}` replaced (see [`expand`]).
    ///
    /// # Errors
    ///
    /// As [`expand`].
    pub fn resolved(&self) -> Result<Secret, String> {
        expand(&self.0).map(Secret)
    }
}

/// A value given in the config, or made from one (an upstream instance's `env` with its
/// tenant filled in).
impl From<String> for Secret {
    fn from(value: String) -> Secret {
        Secret(value)
    }
}

/// A bearer token's SHA-256: what the host keeps of a tenant's token, and compares a
/// presented token's digest with (in constant time).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TokenDigest(pub [u8; 32]);

impl TokenDigest {
    pub fn of(token: &[u8]) -> TokenDigest {
        TokenDigest(Sha256::digest(token).into())
    }

    /// A digest written as 64 hexadecimal digits (`token_sha256` in the config).
    pub fn parse(hex: &str) -> Option<TokenDigest> {
        let hex = hex.trim();
        if hex.len() != 64 || !hex.is_ascii() {
            return None;
        }
        let mut digest = [0u8; 32];
        for (i, byte) in digest.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(TokenDigest(digest))
    }

    /// Whether `other` is this digest, in time independent of where they differ.
    pub fn matches(&self, other: &TokenDigest) -> bool {
        use subtle::ConstantTimeEq;
        bool::from(other.0.ct_eq(&self.0))
    }
}

impl std::fmt::Debug for TokenDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenDigest(…)")
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// `value` with each `${NAME}` replaced by the host's environment variable `NAME`, and each
/// `${file:PATH}` by the contents of the file `PATH` without its trailing newline.
///
/// # Errors
///
/// The name of a variable that is not set or a file that cannot be read (never a value),
/// or an unclosed `${`.
pub fn expand(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let Some(end) = rest[at..].find('}') else {
            return Err("an unclosed `${`".into());
        };
        let name = &rest[at + 2..at + end];
        match name.strip_prefix("file:") {
            Some(path) => match std::fs::read_to_string(path) {
                Ok(v) => out.push_str(v.strip_suffix('\n').unwrap_or(&v)),
                Err(e) => return Err(format!("cannot read the secret file {path}: {e}")),
            },
            None => match std::env::var(name) {
                Ok(v) => out.push_str(&v),
                Err(_) => return Err(format!("the environment variable {name} is not set")),
            },
        }
        rest = &rest[at + end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_come_from_the_environment_and_from_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "from-a-file\n").unwrap();
        let written = format!("a-${{file:{}}}-b", file.display());
        assert_eq!(expand(&written).unwrap(), "a-from-a-file-b");
        assert_eq!(expand("${PATH}").unwrap(), std::env::var("PATH").unwrap());
        let missing = expand("${HOOKHOST_SURELY_UNSET_VARIABLE}").unwrap_err();
        assert!(
            missing.contains("HOOKHOST_SURELY_UNSET_VARIABLE"),
            "{missing}"
        );
        assert!(
            expand("${file:/nonexistent/x}")
                .unwrap_err()
                .contains("/nonexistent/x")
        );
        assert!(expand("${unclosed").is_err());
    }

    #[test]
    fn a_token_matches_its_digest_only() {
        let digest = TokenDigest::of(b"a-token-of-enough-bytes-0123456789");
        assert!(digest.matches(&TokenDigest::of(b"a-token-of-enough-bytes-0123456789")));
        assert!(!digest.matches(&TokenDigest::of(b"a-token-of-enough-bytes-012345678")));
        let hex = crate::ids::hex(&digest.0);
        assert_eq!(TokenDigest::parse(&hex), Some(digest));
        assert_eq!(TokenDigest::parse("abc"), None);
        assert_eq!(format!("{digest:?}"), "TokenDigest(…)");
    }
}
