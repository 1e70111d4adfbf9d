//! The virtual mounts the model and the components see, and where they live on the host.
//!
//! The model only ever sees virtual paths (`/workspace`, `/artifacts`...). Each mount maps
//! to a host directory template in which `{data}`, `{tenant}`, `{session}` and `{workdir}`
//! are substituted per session — ids always through [`crate::ids::path_segment`], so an id
//! cannot traverse or collide. A mount's [`Scope`] says whether it goes with the session.
//!
//! Security rules enforced here, when the table is built:
//! - a virtual path is `/` and one name of `[a-z0-9_-]`;
//! - a template is absolute after substitution and has no `.`/`..` segment;
//! - a `session` mount's template names both `{tenant}` and `{session}`, a `tenant` mount's
//!   names `{tenant}`: so deleting one session's directories can never reach another's;
//! - no mount's directory lies inside another's, so a guest granted one mount cannot plant
//!   a symlink where the host will later create another — except inside the session's
//!   working directory (the user's project: `/workspace` and `/plans` in
//!   `{workdir}/.hookhost/plans`), where every directory between the working directory and
//!   the mount is checked for symlinks on every grant instead;
//! - a mount that resolves into the working directory is the user's: it is never deleted,
//!   whatever its scope (see [`ResolvedMount::scope`]).

use crate::ids::{SessionId, TenantId};
use crate::persistent::OnConflict;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Component, Path, PathBuf};

/// How long a mount's directory lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// Deleted with the session.
    #[default]
    Session,
    /// Kept across the tenant's sessions.
    Tenant,
    /// Kept; never touched by session deletion.
    Persistent,
}

/// One mount as the operator declares it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MountSpec {
    /// The host directory template, e.g. `{data}/tenants/{tenant}/sessions/{session}/artifacts`.
    pub host: String,
    /// Used instead of `host` when the session has a working directory, e.g. `{workdir}`
    /// for `/workspace` (the user's project); must start with `{workdir}`.
    #[serde(default)]
    pub in_workdir: Option<String>,
    /// Used instead of `host` and `in_workdir` when the session's working directory is a
    /// git repository, e.g. `{workdir}/.hookhost/plans`; must start with `{workdir}`.
    #[serde(default)]
    pub in_git_workdir: Option<String>,
    /// Whether the directory goes with the session.
    #[serde(default)]
    pub scope: Scope,
    /// For a persistent directory's checkout (`[persistent."/persistent/NAME"]`, not a
    /// `[mounts]` key): its backing tree and how it is committed.
    #[serde(skip)]
    pub persistent: Option<PersistentSpec>,
}

/// `[persistent."/persistent/NAME"]`: a tree kept across sessions in `backing` (a host
/// directory template: `{data}`, `{tenant}`, `{workdir}`, never `{session}`), which each
/// session loads into its own checkout on first use and publishes at its commit boundary
/// (see [`crate::persistent`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersistentSpec {
    /// The host directory that holds the tree: a template as `host` is, without
    /// `{session}`.
    pub backing: String,
    /// `rw` (the default) or `ro`: a read-only one is granted read-only to every
    /// component, whatever its grant says, and never committed.
    #[serde(default)]
    pub access: PersistentAccess,
    /// When the checkout is published besides the session's end: see [`CommitAt`]. An
    /// explicit commit (`hookhost/commit`, `hookhost session commit`) works with any.
    #[serde(default)]
    pub commit: CommitAt,
    /// A file changed both in the tree since the session loaded it and by the session:
    /// the commit fails (`fail`), the tree's stays (`theirs`), or the session's wins
    /// (`ours`).
    #[serde(default)]
    pub on_conflict: OnConflict,
    /// A store component (`builtin:NAME` or a `.wasm` path of the `harness:store` world)
    /// that keeps the tree in `backing` its own way, instead of hookhost as it is: it is
    /// given `backing` as `/store` and the checkout as `/checkout`, and loads and commits.
    #[serde(default)]
    pub store: Option<String>,
    /// Its store's settings, text values handed to it through `wasi:config/store` (a
    /// remote store's `url`).
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    /// The hosts its store's `wasi:http` requests may reach (a remote it keeps the tree
    /// on), under the tenant's ceiling; none when left out.
    #[serde(default)]
    pub network: Option<crate::network::NetworkGrant>,
    /// Its store's limits for each load or commit, over the tenant's (a remote store may
    /// need more `network_requests` than a hook's call).
    #[serde(default)]
    pub limits: crate::limits::LimitOverrides,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PersistentAccess {
    #[default]
    Rw,
    Ro,
}

/// A persistent directory's commit boundary. Whatever it is, a session's end and an
/// explicit commit publish the checkout too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CommitAt {
    /// At the end of each of the agent's turns (its `Stop`/`AfterAgent` hook event, see
    /// [`crate::agents::Event::TurnEnd`]); a client without turns (MCP) publishes at the
    /// session's end or when it asks (`hookhost/commit`).
    #[default]
    Turn,
    /// Only at the session's end (or when asked).
    Session,
    /// After every call.
    Call,
}

/// Where a persistent directory's checkout lives: in the session's directory, deleted
/// with it; its manifest beside it, where no component reaches.
const CHECKOUT_TEMPLATE: &str = "{data}/tenants/{tenant}/sessions/{session}/persistent";

impl MountSpec {
    /// The mount of `[persistent.<virtual_path>]`: the session's checkout.
    pub fn checkout(virtual_path: &str, spec: PersistentSpec) -> MountSpec {
        let name = virtual_path.rsplit('/').next().unwrap_or_default();
        MountSpec {
            host: format!("{CHECKOUT_TEMPLATE}/{name}"),
            in_workdir: None,
            in_git_workdir: None,
            scope: Scope::Session,
            persistent: Some(spec),
        }
    }
}

impl MountSpec {
    /// The host templates this mount may use.
    pub fn templates(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.host.as_str())
            .chain(self.in_workdir.as_deref())
            .chain(self.in_git_workdir.as_deref())
    }

    /// The template in force for a session with `workdir`.
    fn template_for(&self, workdir: Option<&Path>) -> &str {
        match (workdir, &self.in_workdir, &self.in_git_workdir) {
            (Some(w), _, Some(git)) if is_git_repository(w) => git,
            (Some(_), Some(inside), _) => inside,
            _ => &self.host,
        }
    }
}

/// Why a mount table was refused.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    #[error(
        "mount {0:?}: a virtual path is '/' (or '/persistent/' for a persistent directory) followed by one name of a-z, 0-9, '_' or '-'"
    )]
    BadVirtualPath(String),
    #[error("mount {path:?}: {why}")]
    BadTemplate { path: String, why: String },
    #[error("mounts {inner:?} and {outer:?}: one directory lies inside the other")]
    Nested { inner: String, outer: String },
    #[error("{0:?} is granted but is not a declared mount")]
    Undeclared(String),
    #[error("mount {0:?} uses {{workdir}} but the session has no working directory")]
    NoWorkdir(String),
    #[error("could not create the directory of mount {path:?}: {source}")]
    Create { path: String, source: io::Error },
    #[error("the directory of mount {path:?} ({host}) goes through a symlink; refusing it")]
    Symlink { path: String, host: PathBuf },
}

/// The operator's mounts, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct MountTable {
    mounts: BTreeMap<String, MountSpec>,
}

/// What a template is filled with for one session.
pub struct SessionVars<'a> {
    pub data: &'a Path,
    pub tenant: &'a TenantId,
    pub session: &'a SessionId,
    pub workdir: Option<&'a Path>,
}

/// A mount of one session: its virtual path and its host directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedMount {
    pub virtual_path: String,
    pub host: PathBuf,
    /// The declared scope, except that a mount in the working directory is always
    /// [`Scope::Persistent`]: the user's project is never deleted with a session.
    pub scope: Scope,
    /// The directory below which no symlink may lie on the way to `host`: the session's
    /// working directory for a mount in it, else `None` (the data directory applies).
    pub workdir: Option<PathBuf>,
    /// For a persistent directory's checkout (`host`): its backing tree.
    pub persistent: Option<ResolvedPersistent>,
}

/// A persistent directory of one session: the backing tree its checkout loads from and
/// commits to, and where the checkout's manifest is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPersistent {
    pub backing: PathBuf,
    pub manifest: PathBuf,
    pub spec: PersistentSpec,
}

impl ResolvedMount {
    /// Whether components may only read it, whatever they were granted: a read-only
    /// persistent directory.
    pub fn read_only(&self) -> bool {
        self.persistent
            .as_ref()
            .is_some_and(|p| p.spec.access == PersistentAccess::Ro)
    }

    /// Whether the mount lives in the session's working directory.
    pub fn in_workdir(&self) -> bool {
        self.workdir.is_some()
    }
}

impl MountTable {
    /// Validates `mounts` (see the module's security rules).
    ///
    /// # Errors
    ///
    /// A [`MountError`] naming the first mount that breaks a rule.
    pub fn new(mounts: BTreeMap<String, MountSpec>) -> Result<MountTable, MountError> {
        for (path, spec) in &mounts {
            validate_virtual_path(path, spec.persistent.is_some())?;
            validate_template(path, spec)?;
        }
        // Nesting is checked on templates with placeholders as opaque names; two templates
        // nest when one's segments are a prefix of the other's.
        // Inside the working directory nesting is allowed (see the module's rules).
        // A backing tree counts as a mount: no component may reach it but through a
        // checkout.
        let segments: Vec<(&String, Vec<&str>)> = mounts
            .iter()
            .flat_map(|(p, s)| {
                s.templates()
                    .chain(s.persistent.as_ref().map(|p| p.backing.as_str()))
                    .map(move |t| (p, t))
            })
            .map(|(p, t)| (p, t.split('/').filter(|s| !s.is_empty()).collect()))
            .collect();
        let in_workdir = |s: &[&str]| s.first() == Some(&"{workdir}");
        for (i, (a, sa)) in segments.iter().enumerate() {
            for (b, sb) in segments[i + 1..]
                .iter()
                .filter(|(b, sb)| b != a && !(in_workdir(sa) && in_workdir(sb)))
            {
                let (short, long, inner, outer) = if sa.len() <= sb.len() {
                    (sa, sb, b, a)
                } else {
                    (sb, sa, a, b)
                };
                if long.starts_with(short) {
                    return Err(MountError::Nested {
                        inner: inner.to_string(),
                        outer: outer.to_string(),
                    });
                }
            }
        }
        Ok(MountTable { mounts })
    }

    pub fn get(&self, virtual_path: &str) -> Option<&MountSpec> {
        self.mounts.get(virtual_path)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &MountSpec)> {
        self.mounts.iter().map(|(p, s)| (p.as_str(), s))
    }

    /// The mounts of one session, templates filled in.
    ///
    /// # Errors
    ///
    /// [`MountError::NoWorkdir`] when a template names `{workdir}` and the session has none.
    pub fn resolve(&self, vars: &SessionVars<'_>) -> Result<Vec<ResolvedMount>, MountError> {
        self.mounts
            .iter()
            .map(|(path, spec)| {
                let template = spec.template_for(vars.workdir);
                let workdir = template
                    .starts_with("{workdir}")
                    .then(|| vars.workdir.map(Path::to_path_buf))
                    .flatten();
                let host = fill(path, template, vars)?;
                let persistent = match &spec.persistent {
                    Some(p) => Some(ResolvedPersistent {
                        backing: fill(path, &p.backing, vars)?,
                        manifest: host.with_extension("manifest.json"),
                        spec: p.clone(),
                    }),
                    None => None,
                };
                Ok(ResolvedMount {
                    virtual_path: path.clone(),
                    host,
                    scope: if workdir.is_some() {
                        Scope::Persistent
                    } else {
                        spec.scope
                    },
                    workdir,
                    persistent,
                })
            })
            .collect()
    }
}

/// One name after `/`, or after `/persistent/` for a persistent directory.
fn validate_virtual_path(path: &str, persistent: bool) -> Result<(), MountError> {
    let name = match persistent {
        true => path.strip_prefix("/persistent/").unwrap_or(""),
        false => path.strip_prefix('/').unwrap_or(""),
    };
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(MountError::BadVirtualPath(path.to_string()))
    }
}

fn validate_template(path: &str, spec: &MountSpec) -> Result<(), MountError> {
    check_template(path, &spec.host, spec.scope)?;
    if let Some(persistent) = &spec.persistent {
        if persistent.backing.contains("{session}") {
            return Err(MountError::BadTemplate {
                path: path.to_string(),
                why: "a backing tree is kept across sessions: it cannot name {session}".into(),
            });
        }
        check_template(path, &persistent.backing, Scope::Persistent)?;
    }
    for (key, template) in [
        ("in_workdir", &spec.in_workdir),
        ("in_git_workdir", &spec.in_git_workdir),
    ] {
        let Some(template) = template else { continue };
        if !template.starts_with("{workdir}") {
            return Err(MountError::BadTemplate {
                path: path.to_string(),
                why: format!("`{key}` must start with '{{workdir}}'"),
            });
        }
        // Kept whatever the scope: the working directory is the user's.
        check_template(path, template, Scope::Persistent)?;
    }
    Ok(())
}

fn check_template(path: &str, t: &str, scope: Scope) -> Result<(), MountError> {
    let bad = |why: &str| MountError::BadTemplate {
        path: path.to_string(),
        why: why.to_string(),
    };
    if !(t.starts_with('/') || t.starts_with("{data}") || t.starts_with("{workdir}")) {
        return Err(bad(
            "the host directory must start with '/', '{data}' or '{workdir}'",
        ));
    }
    let segments: Vec<&str> = t.split('/').collect();
    for (i, segment) in segments.iter().enumerate() {
        if *segment == "." || *segment == ".." {
            return Err(bad("'.' and '..' are not allowed in a host directory"));
        }
        let rest = segment
            .replace("{data}", "")
            .replace("{tenant}", "")
            .replace("{session}", "")
            .replace("{workdir}", "");
        if rest.contains(['{', '}']) {
            return Err(bad(
                "unknown placeholder; the known ones are {data}, {tenant}, {session}, {workdir}",
            ));
        }
        if (segment.contains("{data}") || segment.contains("{workdir}"))
            && (i != 0 || !rest.is_empty())
        {
            return Err(bad(
                "{data} and {workdir} may only start the host directory",
            ));
        }
        if (segment.contains("{tenant}") || segment.contains("{session}"))
            && !matches!(*segment, "{tenant}" | "{session}")
        {
            return Err(bad(
                "{tenant} and {session} must each be a whole path segment",
            ));
        }
    }
    let names = |p: &str| t.contains(p);
    if t.starts_with("{workdir}") {
        // Kept whatever the scope: the working directory is the user's.
        return Ok(());
    }
    match scope {
        Scope::Session if !(names("{tenant}") && names("{session}")) => Err(bad(
            "a session-scoped directory must name {tenant} and {session}, so that deleting a session touches only its own files",
        )),
        Scope::Tenant if !names("{tenant}") => Err(bad(
            "a tenant-scoped directory must name {tenant}, so that tenants never share it",
        )),
        _ => Ok(()),
    }
}

/// A git work tree (`.git` is a directory) or a linked worktree (`.git` is a file).
fn is_git_repository(dir: &Path) -> bool {
    dir.join(".git").exists()
}

fn fill(path: &str, template: &str, vars: &SessionVars<'_>) -> Result<PathBuf, MountError> {
    let mut s = template.replace("{tenant}", &vars.tenant.path_segment());
    s = s.replace("{session}", &vars.session.path_segment());
    s = s.replace("{data}", &vars.data.to_string_lossy());
    if s.contains("{workdir}") {
        let workdir = vars
            .workdir
            .ok_or_else(|| MountError::NoWorkdir(path.to_string()))?;
        s = s.replace("{workdir}", &workdir.to_string_lossy());
    }
    Ok(PathBuf::from(s))
}

/// Creates `mount`'s directory (0700) if it is missing, and checks that neither it nor any
/// directory between `root` (the data directory; for a mount in the working directory,
/// the working directory) and it is a symlink, so a planted link cannot redirect a grant.
/// Directories above that root are the operator's or the user's and are trusted.
///
/// # Errors
///
/// [`MountError::Create`] when a directory cannot be made, [`MountError::Symlink`] when the
/// path goes through a symlink.
pub fn ensure_dir(root: &Path, mount: &ResolvedMount) -> Result<(), MountError> {
    let err = |source| MountError::Create {
        path: mount.virtual_path.clone(),
        source,
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&mount.host)
        .map_err(err)?;
    let root = mount.workdir.as_deref().unwrap_or(root);
    let Ok(below_root) = mount.host.strip_prefix(root) else {
        return Ok(());
    };
    let mut dir = root.to_path_buf();
    for part in below_root.components() {
        let Component::Normal(name) = part else {
            continue;
        };
        dir.push(name);
        let meta = fs::symlink_metadata(&dir).map_err(err)?;
        if meta.file_type().is_symlink() || !meta.is_dir() {
            return Err(MountError::Symlink {
                path: mount.virtual_path.clone(),
                host: mount.host.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(host: &str, scope: Scope) -> MountSpec {
        MountSpec {
            host: host.into(),
            in_workdir: None,
            in_git_workdir: None,
            scope,
            persistent: None,
        }
    }

    fn table(entries: &[(&str, &str, Scope)]) -> Result<MountTable, MountError> {
        MountTable::new(
            entries
                .iter()
                .map(|(p, h, s)| (p.to_string(), spec(h, *s)))
                .collect(),
        )
    }

    #[test]
    fn session_scope_must_name_tenant_and_session() {
        let e = table(&[("/w", "{data}/{session}", Scope::Session)]).unwrap_err();
        assert!(
            e.to_string().contains("must name {tenant} and {session}"),
            "{e}"
        );
        assert!(table(&[("/w", "{data}/{tenant}/x", Scope::Tenant)]).is_ok());
        assert!(table(&[("/w", "{data}/shared", Scope::Tenant)]).is_err());
    }

    #[test]
    fn bad_paths_and_templates_are_refused() {
        assert!(table(&[("/a/b", "{data}/{tenant}", Scope::Tenant)]).is_err());
        assert!(table(&[("/", "{data}/{tenant}", Scope::Tenant)]).is_err());
        assert!(table(&[("/a", "{data}/../{tenant}", Scope::Tenant)]).is_err());
        assert!(table(&[("/a", "rel/{tenant}", Scope::Tenant)]).is_err());
        assert!(table(&[("/a", "{data}/{tenant}/{nope}", Scope::Tenant)]).is_err());
        assert!(table(&[("/a", "{data}/t-{tenant}", Scope::Tenant)]).is_err());
        assert!(table(&[("/a", "/x/{data}/{tenant}", Scope::Tenant)]).is_err());
    }

    #[test]
    fn nested_mounts_are_refused() {
        let e = table(&[
            ("/a", "{data}/{tenant}", Scope::Tenant),
            ("/b", "{data}/{tenant}/b", Scope::Tenant),
        ])
        .unwrap_err();
        assert!(matches!(e, MountError::Nested { .. }), "{e}");
    }

    #[test]
    fn ids_are_encoded_into_paths() {
        let t = table(&[(
            "/workspace",
            "{data}/tenants/{tenant}/sessions/{session}/workspace",
            Scope::Session,
        )])
        .unwrap();
        let tenant = TenantId::new("T").unwrap();
        let session = SessionId::new("..").unwrap();
        let resolved = t
            .resolve(&SessionVars {
                data: Path::new("/d"),
                tenant: &tenant,
                session: &session,
                workdir: None,
            })
            .unwrap();
        let ws = resolved
            .iter()
            .find(|m| m.virtual_path == "/workspace")
            .unwrap();
        assert_eq!(
            ws.host,
            PathBuf::from("/d/tenants/%54/sessions/%2E%2E/workspace")
        );
    }
}
