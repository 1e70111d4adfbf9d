//! The suite of a store component (`harness:store`): a scratch persistent directory kept
//! by it, which scratch sessions load and commit through the real runtime — an empty load,
//! files created, a new session loading them, a conflict named, a deletion published, and
//! its versions listed and restored when it keeps them.

use super::{Report, Scratch, Verdict};
use crate::component::ComponentRef;
use crate::config::Plan;
use crate::mounts::{MountSpec, MountTable, PersistentSpec};
use crate::persistent::PersistentError;
use crate::sessions::{Session, SessionError};
use crate::{Runtime, TenantId};
use std::collections::BTreeMap;
use std::path::Path;

/// The scratch persistent directory.
const MOUNT: &str = "/persistent/check";

/// The suite, the store given `options`' settings and `--allow` grant as the config would
/// give them.
pub(super) async fn suite(
    component: &ComponentRef,
    options: &super::CheckOptions,
    scratch: &Scratch,
    report: &mut Report,
) {
    let settings = options
        .settings
        .iter()
        .map(|(key, value)| (key.clone(), crate::config::setting_text(value)))
        .collect();
    let network = (!options.allow.is_empty()).then(|| crate::network::NetworkGrant {
        allow: options.allow.clone(),
    });
    let spec = PersistentSpec {
        backing: "{data}/check-store".into(),
        access: Default::default(),
        commit: Default::default(),
        on_conflict: Default::default(),
        store: Some(component.to_string()),
        settings,
        network,
        limits: Default::default(),
    };
    let mounts = BTreeMap::from([(MOUNT.to_string(), MountSpec::checkout(MOUNT, spec))]);
    let mounts = match MountTable::new(mounts) {
        Ok(mounts) => mounts,
        Err(e) => return report.add(Verdict::Fail, format!("no scratch directory: {e}")),
    };
    let mut plan = Plan::new(mounts, "component check");
    plan.engine.pooling = false;
    let runtime = match Runtime::new(plan, scratch.path()).await {
        Ok(runtime) => runtime,
        Err(e) => {
            return report.add(
                Verdict::Fail,
                format!("does not load: {}", crate::failure::error_line(&e)),
            );
        }
    };
    if let Err(why) = cases(&runtime, report).await {
        report.add(Verdict::Fail, why);
    }
}

/// The cases, in order; the first that cannot go on says why.
async fn cases(runtime: &Runtime, report: &mut Report) -> Result<(), String> {
    let session = || async {
        let session = runtime
            .sessions()
            .create(TenantId::default_tenant(), None, None)
            .await
            .map_err(|e| format!("no scratch session: {e}"))?;
        runtime
            .prepare(&session, |_| true, &Default::default())
            .await
            .map_err(|e| format!("load: {e}"))?;
        Ok::<Session, String>(session)
    };
    let a = session().await?;
    let dir_a = checkout(&a)?;
    if files(&dir_a).is_empty() {
        report.add(
            Verdict::Pass,
            "load: an empty store loads an empty checkout",
        );
    } else {
        report.add(Verdict::Fail, "load: an empty store loaded files");
    }

    write(&dir_a, "notes/a.md", "one")?;
    write(&dir_a, "b.md", "two")?;
    let committed = commit(runtime, &a)
        .await
        .map_err(|e| format!("commit: {e}"))?;
    check(
        report,
        committed == ["b.md", "notes/a.md"],
        "commit: two files created",
        &committed,
    );

    let b = session().await?;
    let dir_b = checkout(&b)?;
    let loaded = [read(&dir_b, "notes/a.md"), read(&dir_b, "b.md")];
    check(
        report,
        loaded == ["one", "two"],
        "load: a new session loads what was committed",
        &loaded,
    );

    write(&dir_a, "notes/a.md", "a's")?;
    std::fs::remove_file(dir_a.join("b.md")).map_err(|e| e.to_string())?;
    write(&dir_b, "notes/a.md", "b's")?;
    commit(runtime, &a)
        .await
        .map_err(|e| format!("commit: {e}"))?;
    match runtime.commit(&b, None, None).await {
        Err(SessionError::Commit {
            source: PersistentError::Conflict(paths),
            ..
        }) if paths == ["notes/a.md"] => report.add(
            Verdict::Pass,
            "commit: a file changed since the load fails as a conflict naming it",
        ),
        other => report.add(
            Verdict::Fail,
            format!("commit: a file changed since the load must conflict (`conflict([\"notes/a.md\"])`), not {other:?}"),
        ),
    }

    let c = session().await?;
    let dir_c = checkout(&c)?;
    let seen = [read(&dir_c, "notes/a.md"), read(&dir_c, "b.md")];
    check(
        report,
        seen == ["a's", ""],
        "load: an update and a deletion are published",
        &seen,
    );

    let Some(store) = runtime.store(MOUNT).filter(|s| s.keeps_versions()) else {
        report.add(Verdict::Note, "keeps no versions (no `versions` export)");
        return Ok(());
    };
    let outside = runtime
        .sessions()
        .outside_sessions(&TenantId::default_tenant())
        .map_err(|e| e.to_string())?;
    let mount = outside
        .mounts()
        .iter()
        .find(|m| m.virtual_path == MOUNT)
        .ok_or("no scratch mount")?;
    let tenants = runtime.tenants();
    let history = store
        .history(mount, &outside.tenant, &tenants)
        .await
        .map_err(|e| format!("history: {e}"))?;
    check(
        report,
        history.len() == 2,
        "history: one version per commit",
        &history.len(),
    );
    let first = history.first().map(|v| v.id.clone()).unwrap_or_default();
    store
        .restore(mount, &first, &outside.tenant, &tenants)
        .await
        .map_err(|e| format!("restore: {e}"))?;
    let d = session().await?;
    let restored = [
        read(&checkout(&d)?, "notes/a.md"),
        read(&checkout(&d)?, "b.md"),
    ];
    check(
        report,
        restored == ["one", "two"],
        "restore: the first version is the newest again",
        &restored,
    );
    Ok(())
}

fn check(report: &mut Report, ok: bool, what: &str, found: &dyn std::fmt::Debug) {
    match ok {
        true => report.add(Verdict::Pass, what),
        false => report.add(Verdict::Fail, format!("{what}: found {found:?}")),
    }
}

/// Commits `session`: the files created, sorted.
async fn commit(runtime: &Runtime, session: &Session) -> Result<Vec<String>, SessionError> {
    let mut created: Vec<String> = runtime
        .commit(session, None, None)
        .await?
        .into_iter()
        .flat_map(|(_, report)| report.created)
        .collect();
    created.sort();
    Ok(created)
}

fn checkout(session: &Session) -> Result<std::path::PathBuf, String> {
    session
        .host_dir(MOUNT)
        .map(Path::to_path_buf)
        .ok_or_else(|| "no checkout".into())
}

fn write(dir: &Path, relative: &str, text: &str) -> Result<(), String> {
    let path = dir.join(relative);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    std::fs::write(path, text).map_err(|e| e.to_string())
}

/// A file's text; empty when it is missing.
fn read(dir: &Path, relative: &str) -> String {
    std::fs::read_to_string(dir.join(relative)).unwrap_or_default()
}

fn files(dir: &Path) -> Vec<std::fs::DirEntry> {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().collect())
        .unwrap_or_default()
}
