//! Secrets of the config — tenants' tokens, the session store's URL, upstreams'
//! environments and headers — and the host variables they may name.
//!
//! Security rule: a [`Secret`] is compared and handed on, never printed (its `Debug` says
//! `Secret(…)`), and [`expand_env`]'s errors name a variable, never its value.

use serde::Deserialize;

/// A secret from the config: compared, never printed.
#[derive(Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// `value` with each `${NAME}` replaced by the host's environment variable `NAME`.
///
/// # Errors
///
/// The name of a variable that is not set (never a value), or an unclosed `${`.
pub fn expand_env(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let Some(end) = rest[at..].find('}') else {
            return Err("an unclosed `${`".into());
        };
        let name = &rest[at + 2..at + end];
        match std::env::var(name) {
            Ok(v) => out.push_str(&v),
            Err(_) => return Err(format!("the environment variable {name} is not set")),
        }
        rest = &rest[at + end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}
