//! Untrusted names that reach host paths: session ids, tenant ids, tool names; and the
//! patterns that pick tools by name ([`ToolMatch`]).
//!
//! Security rule: such a name is *validated* (non-empty, at most [`MAX_ID_BYTES`], no
//! control characters, no `/`) and then *encoded* into one path segment by
//! [`path_segment`], an injective encoding whose output uses only `[a-z0-9_-%]`. Two
//! different names therefore never share a directory — not even on a case-insensitive
//! file system — and no name can become `.`, `..` or contain a separator.

use crate::limits::MAX_ID_BYTES;
use std::fmt;
use std::str::FromStr;
use wildmatch::WildMatch;

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{kind} is empty")]
    Empty { kind: &'static str },
    #[error("{kind} is longer than {MAX_ID_BYTES} bytes")]
    TooLong { kind: &'static str },
    #[error("{kind} {value:?} contains a character that is not allowed (control or '/')")]
    BadCharacter { kind: &'static str, value: String },
}

fn validate(kind: &'static str, s: &str) -> Result<(), IdError> {
    if s.is_empty() {
        return Err(IdError::Empty { kind });
    }
    if s.len() > MAX_ID_BYTES {
        return Err(IdError::TooLong { kind });
    }
    if s.chars().any(|c| c.is_control() || c == '/' || c == '\\') {
        return Err(IdError::BadCharacter {
            kind,
            value: s.to_string(),
        });
    }
    Ok(())
}

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            /// Validates `s`.
            ///
            /// # Errors
            ///
            /// [`IdError`] when `s` is empty, too long, or holds a control character or `/`.
            pub fn new(s: impl Into<String>) -> Result<Self, IdError> {
                let s = s.into();
                validate($kind, &s)?;
                Ok($name(s))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// This id as one host path segment (see [`path_segment`]).
            pub fn path_segment(&self) -> String {
                path_segment(&self.0)
            }

            /// This id as one URL path segment (see [`url_segment`]).
            pub fn url_segment(&self) -> String {
                url_segment(&self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                $name::new(s)
            }
        }
    };
}

id_type!(
    /// An agent session. Made by the host as a UUID, or given by a caller and validated.
    SessionId,
    "session id"
);
id_type!(
    /// A tenant: who owns sessions. `default` when the config declares none.
    TenantId,
    "tenant id"
);

impl SessionId {
    /// A new random session id (a UUID v4).
    pub fn generate() -> SessionId {
        SessionId(uuid::Uuid::new_v4().to_string())
    }
}

impl TenantId {
    /// The tenant of sessions made without naming one.
    pub fn default_tenant() -> TenantId {
        TenantId("default".to_string())
    }
}

/// `bytes` as lowercase hexadecimal digits, two a byte (digests in file names and keys).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Encodes `s` as one path segment: `[a-z0-9_-]` are kept, every other byte of its UTF-8
/// becomes `%XX` (upper-case hex). Injective, and the result is never `.`, `..` or empty
/// for a non-empty input.
pub fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Encodes `s` as one URL path segment: as [`path_segment`], with `~` for its `%`, so the
/// result is all unreserved characters (`[a-z0-9_-]`, and `~` before two of `[0-9A-F]`)
/// that a server decoding the URL leaves as they are — never `.`, `..`, a `/` or an
/// escape. Injective, as `~` appears nowhere else.
pub fn url_segment(s: &str) -> String {
    path_segment(s).replace('%', "~")
}

/// Which tools a layer applies to: names, with `*` and `?` wildcards.
#[derive(Debug, Clone)]
pub struct ToolMatch {
    patterns: Vec<WildMatch>,
}

/// The same patterns.
impl PartialEq for ToolMatch {
    fn eq(&self, other: &ToolMatch) -> bool {
        let written = |m: &ToolMatch| {
            m.patterns
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        };
        written(self) == written(other)
    }
}

impl ToolMatch {
    pub fn new<S: AsRef<str>>(patterns: &[S]) -> ToolMatch {
        ToolMatch {
            patterns: patterns
                .iter()
                .map(|p| WildMatch::new(p.as_ref()))
                .collect(),
        }
    }

    /// Every tool.
    pub fn all() -> ToolMatch {
        ToolMatch::new(&["*"])
    }

    pub fn matches(&self, tool: &str) -> bool {
        self.patterns.iter().any(|p| p.matches(tool))
    }

    /// The patterns, as configured.
    pub fn patterns(&self) -> Vec<String> {
        self.patterns.iter().map(ToString::to_string).collect()
    }
}

impl fmt::Display for ToolMatch {
    /// The patterns, as configured: `read_file, fs__*`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, pattern) in self.patterns.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{pattern}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_cannot_traverse_or_collide() {
        assert_eq!(path_segment(".."), "%2E%2E");
        assert_eq!(path_segment("a/b"), "a%2Fb");
        assert_ne!(path_segment("A"), path_segment("a"));
        assert_ne!(path_segment("%41"), path_segment("A"));
        assert_eq!(
            path_segment("0b5c-uuid_like"),
            "0b5c-uuid_like",
            "common ids stay readable"
        );
        // In a URL, what a server decodes is no escape either.
        assert_eq!(url_segment(".."), "~2E~2E");
        assert_eq!(url_segment("a%2F.."), "a~252~46~2E~2E");
        assert_ne!(url_segment("~"), url_segment("%7E"));
        assert_eq!(url_segment("acme-1"), "acme-1");
    }

    #[test]
    fn validation() {
        assert!(SessionId::new("").is_err());
        assert!(SessionId::new("a/b").is_err());
        assert!(SessionId::new("x".repeat(MAX_ID_BYTES + 1)).is_err());
        assert!(SessionId::new("line\nbreak").is_err());
        assert!(SessionId::new("..").is_ok(), "valid, and encoded safely");
        assert_eq!(SessionId::new("..").unwrap().path_segment(), "%2E%2E");
    }
}
