//! http-mirror: a store (`harness:store`) that keeps a persistent directory on an HTTP
//! server that takes `PUT` and `DELETE` — nginx with `dav_methods PUT DELETE;
//! create_full_put_path on;`, or any WebDAV server — under the setting `url`. The operator
//! grants it that server and nothing else (`network = { allow = ["files.example:443"] }`);
//! hookhost refuses any other host with `HttpRequestDenied`.
//!
//! Under `url`:
//!
//! - `index.json`: the current version; for each file, the version that wrote it; for
//!   each path deleted, the version that deleted it (`{"version": 3, "files":
//!   {"notes/a.md": 3}, "deleted": {"old.md": 2}}`);
//! - `objects/VERSION/PATH`: each file as that version wrote it.
//!
//! A commit `PUT`s the files it creates or updates under its new version, then the new
//! index: that `PUT` is the commit point. A commit that stopped before it left objects no
//! index names, which the next commit (taking the same version) writes over. Objects the
//! new index no longer names are deleted after it; a failure there leaves garbage, never a
//! wrong tree. A file changed on the server since the commit's base is a conflict. The
//! host serialises the loads and commits of one directory, so two hosts must share their
//! data directory (or session table) to share a `url`. `/store` is not used.
//!
//! Each load or commit makes one request per file it moves, plus one or two: raise the
//! directory's `limits.network_requests` above the tree's size.

wit_bindgen::generate!({
    path: "wit",
    world: "http-mirror",
    generate_all,
});

use exports::harness::store::store::{
    Change, ChangeKind, Committed, Guest, Loaded, OnConflict, StoreError,
};
use hookhost_http::{self as http, Method};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Component, Path};

/// Where the host grants the session's checkout.
const CHECKOUT: &str = "/checkout";

/// The index's name under `url`.
const INDEX: &str = "index.json";

/// The tree as the server has it.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    version: u64,
    /// Path → the version that wrote it.
    #[serde(default)]
    files: BTreeMap<String, u64>,
    /// Path → the version that deleted it.
    #[serde(default)]
    deleted: BTreeMap<String, u64>,
}

impl Index {
    /// Whether `path` changed on the server after version `base`.
    fn changed_since(&self, path: &str, base: u64) -> bool {
        let changed = self.files.get(path).or_else(|| self.deleted.get(path));
        changed.is_some_and(|version| *version > base)
    }
}

/// The server, at the setting `url`.
struct Remote {
    base: String,
}

impl Remote {
    fn from_settings() -> Result<Remote, String> {
        match wasi::config::store::get("url") {
            Ok(Some(url)) if !url.trim().is_empty() => Ok(Remote {
                base: url.trim().trim_end_matches('/').to_string(),
            }),
            Ok(_) => Err("the setting `url` is missing".into()),
            Err(e) => Err(format!("the setting `url` cannot be read: {e:?}")),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}/{}", self.base, encode(path))
    }

    /// `method path` with `body`, which must answer 2xx (or 404, when `absent_ok`):
    /// the response, `None` for a 404.
    fn send(
        &self,
        method: Method,
        path: &str,
        body: &[u8],
        absent_ok: bool,
    ) -> Result<Option<Vec<u8>>, String> {
        // Said by its path under `url` alone: the URL may carry a credential, and what a
        // store answers reaches the model.
        let said = format!("{} {path}", method_name(&method));
        let answer = http::request(method, &self.url(path), &[], body)
            .map_err(|e| format!("{said}: {e}"))?;
        match answer.status {
            404 if absent_ok => Ok(None),
            _ if answer.is_success() => Ok(Some(answer.body)),
            status => Err(format!("{said}: the server answered {status}")),
        }
    }

    fn index(&self) -> Result<Index, String> {
        match self.send(Method::Get, INDEX, &[], true)? {
            None => Ok(Index::default()),
            Some(body) => {
                let index: Index = serde_json::from_slice(&body)
                    .map_err(|e| format!("{INDEX} is not an index: {e}"))?;
                let newer = index.files.values().chain(index.deleted.values());
                match newer.max() {
                    Some(v) if *v > index.version => Err(format!(
                        "{INDEX} names version {v}, past its own {}",
                        index.version
                    )),
                    _ => Ok(index),
                }
            }
        }
    }
}

fn method_name(method: &Method) -> &'static str {
    match method {
        Method::Get => "GET",
        Method::Put => "PUT",
        Method::Delete => "DELETE",
        _ => "request",
    }
}

/// Where version `version` of `path` is kept.
fn object(version: u64, path: &str) -> String {
    format!("objects/{version}/{path}")
}

/// `path` percent-encoded for a URL, its `/` kept.
fn encode(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for byte in path.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(char::from(byte));
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// `path` as a file of the checkout: relative, normal names only (what a server's index
/// says is not trusted).
fn in_checkout(path: &str) -> Result<std::path::PathBuf, String> {
    let relative = Path::new(path);
    if path.is_empty()
        || !relative
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
    {
        return Err(format!("the index names a path that is not one: {path:?}"));
    }
    Ok(Path::new(CHECKOUT).join(relative))
}

fn load() -> Result<Loaded, String> {
    let remote = Remote::from_settings()?;
    let index = remote.index()?;
    let mut bytes = 0u64;
    for (path, version) in &index.files {
        let target = in_checkout(path)?;
        let body = remote
            .send(Method::Get, &object(*version, path), &[], false)?
            .unwrap_or_default();
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        fs::write(&target, &body).map_err(|e| format!("{}: {e}", target.display()))?;
        bytes += body.len() as u64;
    }
    Ok(Loaded {
        version: index.version.to_string(),
        files: index.files.len() as u64,
        bytes,
    })
}

/// What a commit failed of: a conflict, or anything else.
enum Refusal {
    Conflict(Vec<String>),
    Failed(String),
}

impl From<String> for Refusal {
    fn from(why: String) -> Refusal {
        Refusal::Failed(why)
    }
}

fn commit(base: &str, changes: &[Change], on_conflict: OnConflict) -> Result<Committed, Refusal> {
    let remote = Remote::from_settings()?;
    let mut index = remote.index()?;
    let base: u64 = match base {
        "" => 0,
        text => text
            .parse()
            .map_err(|_| format!("the base {text:?} is not a version of this store"))?,
    };
    let conflicts: Vec<String> = changes
        .iter()
        .filter(|c| index.changed_since(&c.path, base))
        .map(|c| c.path.clone())
        .collect();
    let kept_theirs = match on_conflict {
        OnConflict::Fail if !conflicts.is_empty() => return Err(Refusal::Conflict(conflicts)),
        OnConflict::Theirs => conflicts,
        _ => Vec::new(),
    };
    let applied: Vec<&Change> = changes
        .iter()
        .filter(|c| !kept_theirs.contains(&c.path))
        .collect();
    if applied.is_empty() {
        return Ok(Committed {
            version: index.version.to_string(),
            kept_theirs,
        });
    }
    let version = index
        .version
        .checked_add(1)
        .ok_or_else(|| "the index is at the last version there is".to_string())?;
    let mut superseded = Vec::new();
    for change in applied {
        let path = &change.path;
        let replaced = match change.kind {
            ChangeKind::Created | ChangeKind::Updated => {
                let source = in_checkout(path)?;
                let body = fs::read(&source).map_err(|e| format!("{}: {e}", source.display()))?;
                remote.send(Method::Put, &object(version, path), &body, false)?;
                index.deleted.remove(path);
                index.files.insert(path.clone(), version)
            }
            ChangeKind::Deleted => {
                index.deleted.insert(path.clone(), version);
                index.files.remove(path)
            }
        };
        // Older than `version`: the index names none past its own.
        superseded.extend(replaced.map(|old| object(old, path)));
    }
    index.version = version;
    let text = serde_json::to_vec(&index).map_err(|e| format!("the index: {e}"))?;
    remote.send(Method::Put, INDEX, &text, false)?;
    for old in superseded {
        if let Err(why) = remote.send(Method::Delete, &old, &[], true) {
            eprintln!("http-mirror: left behind: {why}");
        }
    }
    Ok(Committed {
        version: version.to_string(),
        kept_theirs,
    })
}

struct HttpMirror;

impl Guest for HttpMirror {
    fn load(_mount: String) -> Result<Loaded, StoreError> {
        load().map_err(StoreError::Failed)
    }

    fn commit(
        _mount: String,
        base: String,
        changes: Vec<Change>,
        on_conflict: OnConflict,
    ) -> Result<Committed, StoreError> {
        commit(&base, &changes, on_conflict).map_err(|refusal| match refusal {
            Refusal::Conflict(paths) => StoreError::Conflict(paths),
            Refusal::Failed(why) => StoreError::Failed(why),
        })
    }
}

export!(HttpMirror);
