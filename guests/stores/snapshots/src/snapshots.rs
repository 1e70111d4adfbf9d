//! The snapshots themselves, on paths given (`/store` and `/checkout` in the component;
//! temporary directories in the tests).

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// What a change does to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Put,
    Delete,
}

/// What a commit does with a conflict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    Fail,
    Theirs,
    Ours,
}

/// Why something failed.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Conflict(Vec<String>),
    Failed(String),
}

/// What a snapshot's record says.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Record {
    pub made_ms: u64,
    pub files: u64,
    pub summary: String,
    /// The paths this version changed from the one before it.
    pub changed: Vec<String>,
}

/// Where the store and the checkout are.
pub struct Dirs {
    pub store: PathBuf,
    pub checkout: PathBuf,
}

impl Default for Dirs {
    fn default() -> Dirs {
        Dirs {
            store: "/store".into(),
            checkout: "/checkout".into(),
        }
    }
}

fn failed(what: impl std::fmt::Display) -> impl FnOnce(io::Error) -> Outcome {
    move |e| Outcome::Failed(format!("{what}: {e}"))
}

fn id(n: u64) -> String {
    format!("{n:06}")
}

impl Dirs {
    fn head(&self) -> Result<u64, Outcome> {
        match fs::read_to_string(self.store.join("HEAD")) {
            Ok(text) => text
                .trim()
                .parse()
                .map_err(|_| Outcome::Failed(format!("HEAD is not a version: {text:?}"))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(failed("HEAD")(e)),
        }
    }

    fn tree(&self, n: u64) -> PathBuf {
        self.store.join("v").join(id(n))
    }

    fn record_path(&self, n: u64) -> PathBuf {
        self.store.join("v").join(format!("{}.json", id(n)))
    }

    fn record(&self, n: u64) -> Result<Record, Outcome> {
        let text = fs::read(self.record_path(n)).map_err(failed(format!("version {}", id(n))))?;
        serde_json::from_slice(&text)
            .map_err(|e| Outcome::Failed(format!("version {}: {e}", id(n))))
    }

    /// Removes what a commit stopped before its commit point left: trees and records newer
    /// than `head`, and unfinished trees.
    fn sweep(&self, head: u64) -> Result<(), Outcome> {
        let dir = self.store.join("v");
        let Ok(entries) = fs::read_dir(&dir) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let number = name.split('.').next().and_then(|n| n.parse::<u64>().ok());
            let stale = name.ends_with(".tmp") || number.is_some_and(|n| n > head);
            if stale {
                let path = entry.path();
                let removed = if path.is_dir() {
                    fs::remove_dir_all(&path)
                } else {
                    fs::remove_file(&path)
                };
                removed.map_err(failed(path.display()))?;
            }
        }
        Ok(())
    }

    /// Makes `tree` the version after `head`, with `record`; then moves `HEAD` to it.
    fn publish(&self, head: u64, tree: &Path, mut record: Record) -> Result<String, Outcome> {
        let next = head + 1;
        record.made_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        record.files = files(tree)?.len() as u64;
        let text = serde_json::to_vec(&record).map_err(|e| Outcome::Failed(e.to_string()))?;
        write_synced(&self.record_path(next), &text)?;
        fs::rename(tree, self.tree(next)).map_err(failed("the new version"))?;
        let head_tmp = self.store.join("HEAD.tmp");
        write_synced(&head_tmp, id(next).as_bytes())?;
        fs::rename(&head_tmp, self.store.join("HEAD")).map_err(failed("HEAD"))?;
        Ok(id(next))
    }

    /// A copy of version `n`'s tree (empty for 0) at `v/NEXT.tmp`, to change into the
    /// version after `head`.
    fn draft(&self, n: u64, head: u64) -> Result<PathBuf, Outcome> {
        let draft = self.store.join("v").join(format!("{}.tmp", id(head + 1)));
        fs::create_dir_all(&draft).map_err(failed(draft.display()))?;
        if n > 0 {
            let from = self.tree(n);
            for relative in files(&from)? {
                copy(&from.join(&relative), &draft.join(&relative))?;
            }
        }
        Ok(draft)
    }
}

/// Writes the current version into the checkout: (version, files, bytes).
pub fn load(dirs: &Dirs) -> Result<(String, u64, u64), Outcome> {
    let head = dirs.head()?;
    let (mut count, mut bytes) = (0, 0);
    if head > 0 {
        let tree = dirs.tree(head);
        for relative in files(&tree)? {
            bytes += copy(&tree.join(&relative), &dirs.checkout.join(&relative))?;
            count += 1;
        }
    }
    Ok((id(head), count, bytes))
}

/// Publishes `changes` made on top of `base`: (the new version, the changes kept as the
/// store has them).
pub fn commit(
    dirs: &Dirs,
    base: &str,
    mut changes: Vec<(String, Kind)>,
    policy: Policy,
) -> Result<(String, Vec<String>), Outcome> {
    for (path, _) in &changes {
        check(path)?;
    }
    let head = dirs.head()?;
    dirs.sweep(head)?;
    let base: u64 = base
        .parse()
        .ok()
        .filter(|b| *b <= head)
        .ok_or_else(|| Outcome::Failed(format!("unknown base version {base:?}")))?;
    let mut since = BTreeSet::new();
    for n in base + 1..=head {
        since.extend(dirs.record(n)?.changed);
    }
    let both: Vec<String> = changes
        .iter()
        .filter(|(p, _)| since.contains(p))
        .map(|(p, _)| p.clone())
        .collect();
    let mut kept_theirs = Vec::new();
    match policy {
        Policy::Fail if !both.is_empty() => return Err(Outcome::Conflict(both)),
        Policy::Theirs => {
            changes.retain(|(p, _)| !since.contains(p));
            kept_theirs = both;
        }
        _ => {}
    }
    if changes.is_empty() {
        return Ok((id(head), kept_theirs));
    }
    let draft = dirs.draft(head, head)?;
    let (mut put, mut gone) = (0, 0);
    for (path, kind) in &changes {
        let target = draft.join(path);
        match kind {
            Kind::Put => {
                copy(&dirs.checkout.join(path), &target)?;
                put += 1;
            }
            Kind::Delete => {
                match fs::remove_file(&target) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        return Err(failed(path)(e));
                    }
                    _ => {}
                }
                gone += 1;
            }
        }
    }
    let record = Record {
        summary: format!("{put} written, {gone} deleted"),
        changed: changes.into_iter().map(|(p, _)| p).collect(),
        ..Record::default()
    };
    Ok((dirs.publish(head, &draft, record)?, kept_theirs))
}

/// Every version: (id, record), oldest first.
pub fn history(dirs: &Dirs) -> Result<Vec<(String, Record)>, String> {
    let head = dirs.head().map_err(say)?;
    (1..=head)
        .map(|n| Ok((id(n), dirs.record(n).map_err(say)?)))
        .collect()
}

/// Makes version `version` the newest: its id.
pub fn restore(dirs: &Dirs, version: &str) -> Result<String, String> {
    let head = dirs.head().map_err(say)?;
    dirs.sweep(head).map_err(say)?;
    let n: u64 = version
        .parse()
        .ok()
        .filter(|n| (1..=head).contains(n))
        .ok_or_else(|| {
            format!(
                "no version {version:?}: the versions are 000001 to {}",
                id(head)
            )
        })?;
    let target = dirs.draft(n, head).map_err(say)?;
    // Every path of the current tree or the restored one counts as changed: a session
    // loaded before conflicts on any file it also changed.
    let mut changed: BTreeSet<String> = files(&dirs.tree(head)).map_err(say)?.into_iter().collect();
    changed.extend(files(&target).map_err(say)?);
    let record = Record {
        summary: format!("restored {}", id(n)),
        changed: changed.into_iter().collect(),
        ..Record::default()
    };
    dirs.publish(head, &target, record).map_err(say)
}

fn say(outcome: Outcome) -> String {
    match outcome {
        Outcome::Conflict(paths) => format!("conflict: {}", paths.join(", ")),
        Outcome::Failed(why) => why,
    }
}

/// A relative path of normal names only.
fn check(path: &str) -> Result<(), Outcome> {
    let normal = !path.is_empty()
        && path
            .split('/')
            .all(|name| !name.is_empty() && name != "." && name != "..");
    if normal {
        Ok(())
    } else {
        Err(Outcome::Failed(format!("not a relative path: {path:?}")))
    }
}

/// The regular files under `root`, relative, `/`-separated, sorted; none when it is missing.
fn files(root: &Path) -> Result<Vec<String>, Outcome> {
    let mut found = Vec::new();
    let mut dirs = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = dirs.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(failed(dir.display())(e)),
        };
        for entry in entries {
            let entry = entry.map_err(failed(dir.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let relative = format!("{prefix}{name}");
            let kind = entry.file_type().map_err(failed(&relative))?;
            if kind.is_dir() {
                dirs.push((entry.path(), format!("{relative}/")));
            } else if kind.is_file() {
                found.push(relative);
            }
        }
    }
    found.sort();
    Ok(found)
}

/// Copies a file, making its directory: the bytes copied.
fn copy(from: &Path, to: &Path) -> Result<u64, Outcome> {
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent).map_err(failed(parent.display()))?;
    }
    fs::copy(from, to).map_err(failed(from.display()))
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), Outcome> {
    use std::io::Write;
    let mut file = fs::File::create(path).map_err(failed(path.display()))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(failed(path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(root: &Path) -> Dirs {
        Dirs {
            store: root.join("store"),
            checkout: root.join("checkout"),
        }
    }

    fn put(dirs: &Dirs, path: &str, text: &str) -> (String, Kind) {
        let file = dirs.checkout.join(path);
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(file, text).unwrap();
        (path.to_string(), Kind::Put)
    }

    #[test]
    fn commits_make_versions_that_conflict_restore_and_list() {
        let root = tempfile::tempdir().unwrap();
        let d = dirs(root.path());
        assert_eq!(load(&d).unwrap(), ("000000".into(), 0, 0));
        let a = put(&d, "notes/a.md", "one");
        let (v1, _) = commit(&d, "000000", vec![a], Policy::Fail).unwrap();
        assert_eq!(v1, "000001");
        let b = put(&d, "b.md", "two");
        let (v2, _) = commit(&d, &v1, vec![b], Policy::Fail).unwrap();
        // A session loaded at 1 changing b.md conflicts; another file does not.
        let stale = put(&d, "b.md", "stale");
        assert_eq!(
            commit(&d, &v1, vec![stale.clone()], Policy::Fail),
            Err(Outcome::Conflict(vec!["b.md".into()]))
        );
        let (same, kept) = commit(&d, &v1, vec![stale], Policy::Theirs).unwrap();
        assert_eq!(
            (same.as_str(), kept),
            (v2.as_str(), vec!["b.md".to_string()])
        );
        let gone = ("notes/a.md".to_string(), Kind::Delete);
        let (v3, _) = commit(&d, &v1, vec![gone], Policy::Fail).unwrap();
        assert!(!d.store.join("v").join(&v3).join("notes/a.md").exists());

        // Back to version 1: a new version with a.md and without b.md.
        let v4 = restore(&d, &v1).unwrap();
        assert_eq!(v4, "000004");
        let tree = d.store.join("v").join(&v4);
        assert_eq!(fs::read_to_string(tree.join("notes/a.md")).unwrap(), "one");
        assert!(!tree.join("b.md").exists());
        let listed: Vec<String> = history(&d)
            .unwrap()
            .into_iter()
            .map(|(id, r)| format!("{id} {} {}", r.files, r.summary))
            .collect();
        assert_eq!(
            listed,
            [
                "000001 1 1 written, 0 deleted",
                "000002 2 1 written, 0 deleted",
                "000003 1 0 written, 1 deleted",
                "000004 1 restored 000001",
            ]
        );
        let fresh = Dirs {
            checkout: root.path().join("fresh"),
            ..dirs(root.path())
        };
        assert_eq!(load(&fresh).unwrap(), ("000004".into(), 1, 3));
    }

    #[test]
    fn a_commit_stopped_before_head_moved_never_was() {
        let root = tempfile::tempdir().unwrap();
        let d = dirs(root.path());
        let a = put(&d, "a.md", "one");
        commit(&d, "000000", vec![a], Policy::Fail).unwrap();
        // What a commit of version 2 stopped before its commit point leaves.
        fs::create_dir_all(d.store.join("v/000002")).unwrap();
        fs::write(d.store.join("v/000002/a.md"), "half").unwrap();
        fs::write(d.store.join("v/000002.json"), "{}").unwrap();
        fs::create_dir_all(d.store.join("v/000003.tmp")).unwrap();
        let b = put(&d, "a.md", "two");
        let (v2, _) = commit(&d, "000001", vec![b], Policy::Fail).unwrap();
        assert_eq!(v2, "000002");
        assert_eq!(
            fs::read_to_string(d.store.join("v/000002/a.md")).unwrap(),
            "two"
        );
        assert!(!d.store.join("v/000003.tmp").exists());
        // Based on 1, changing what 2 changed: `ours` publishes it all the same.
        let c = put(&d, "a.md", "three");
        let (v3, kept) = commit(&d, "000001", vec![c], Policy::Ours).unwrap();
        assert_eq!((v3.as_str(), kept.len()), ("000003", 0));
        assert_eq!(
            fs::read_to_string(d.store.join("v/000003/a.md")).unwrap(),
            "three"
        );
        assert_eq!(
            commit(&d, "000001", vec![("../x".into(), Kind::Put)], Policy::Fail),
            Err(Outcome::Failed("not a relative path: \"../x\"".into()))
        );
    }
}
