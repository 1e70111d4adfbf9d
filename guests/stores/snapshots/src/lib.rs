//! `builtin:snapshots`: a store (`harness:store`) that keeps a persistent directory as
//! numbered snapshots, one per commit, so that a tenant can list its versions and restore
//! one (`hookhost persistent history`, `hookhost persistent restore`).
//!
//! Its directory (`/store`):
//!
//! - `HEAD`: the current version, six digits (`000007`); none means `000000`, empty;
//! - `v/000007/`: the whole tree at that version;
//! - `v/000007.json`: when it was made, how many files it held, what made it, and the
//!   paths it changed (what a commit based on an older version conflicts with).
//!
//! A commit copies the current tree to `v/NEW.tmp`, applies its changes from `/checkout`,
//! writes the snapshot's record, renames the tree into place, then writes `HEAD` beside and
//! renames it over the old one: that rename is the commit point. What a commit stopped
//! before it left (a newer tree or record than `HEAD`) is removed by the next commit. Each
//! snapshot is a full copy: simple, and as large as the tree times the versions kept.

pub mod snapshots;

#[cfg(target_arch = "wasm32")]
mod component {
    wit_bindgen::generate!({
        path: "../../../wit/store@0.1.0",
        world: "versioned-store",
    });

    use super::snapshots::{self, Dirs, Kind, Outcome};
    use exports::harness::store::store::{
        Change, ChangeKind, Committed, Guest, Loaded, OnConflict, StoreError,
    };
    use exports::harness::store::versions::{Guest as Versions, Version};

    struct Snapshots;

    fn error(outcome: Outcome) -> StoreError {
        match outcome {
            Outcome::Conflict(paths) => StoreError::Conflict(paths),
            Outcome::Failed(why) => StoreError::Failed(why),
        }
    }

    impl Guest for Snapshots {
        fn load(_mount: String) -> Result<Loaded, StoreError> {
            let (version, files, bytes) = snapshots::load(&Dirs::default()).map_err(error)?;
            Ok(Loaded {
                version,
                files,
                bytes,
            })
        }

        fn commit(
            _mount: String,
            base: String,
            changes: Vec<Change>,
            on_conflict: OnConflict,
        ) -> Result<Committed, StoreError> {
            let changes = changes
                .into_iter()
                .map(|c| {
                    let kind = match c.kind {
                        ChangeKind::Created | ChangeKind::Updated => Kind::Put,
                        ChangeKind::Deleted => Kind::Delete,
                    };
                    (c.path, kind)
                })
                .collect();
            let policy = match on_conflict {
                OnConflict::Fail => snapshots::Policy::Fail,
                OnConflict::Theirs => snapshots::Policy::Theirs,
                OnConflict::Ours => snapshots::Policy::Ours,
            };
            let (version, kept_theirs) =
                snapshots::commit(&Dirs::default(), &base, changes, policy).map_err(error)?;
            Ok(Committed {
                version,
                kept_theirs,
            })
        }
    }

    impl Versions for Snapshots {
        fn history(_mount: String) -> Result<Vec<Version>, String> {
            Ok(snapshots::history(&Dirs::default())?
                .into_iter()
                .map(|(id, record)| Version {
                    id,
                    made_ms: record.made_ms,
                    files: record.files,
                    summary: record.summary,
                })
                .collect())
        }

        fn restore(_mount: String, id: String) -> Result<String, String> {
            snapshots::restore(&Dirs::default(), &id)
        }
    }

    export!(Snapshots);
}
