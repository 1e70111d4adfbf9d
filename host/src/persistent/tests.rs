use super::checkout::Journal;
use super::*;

fn put(dir: &Path, relative: &str, text: &str) {
    let path = dir.join(relative);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

fn read(dir: &Path, relative: &str) -> Option<String> {
    fs::read_to_string(dir.join(relative)).ok()
}

/// A commit whose process died after publishing, before its manifest was rewritten,
/// is not its own conflict when committed again; nor are two sessions' same change.
#[test]
fn the_same_bytes_on_both_sides_are_no_conflict() {
    let root = tempfile::tempdir().unwrap();
    let store = Backing::new(root.path().join("store"));
    put(store.root(), "n.md", "v1");
    let a = root.path().join("a");
    let (loaded, _) = store.load(&a).unwrap();
    put(&a, "n.md", "v2");
    put(&a, "new.md", "new");
    let mut published = loaded.clone();
    store
        .commit(&a, &mut published, OnConflict::Fail, Room::default())
        .unwrap();
    // The manifest as it was before that commit: what a crash would have left.
    let mut stale = loaded;
    let again = store
        .commit(&a, &mut stale, OnConflict::Fail, Room::default())
        .unwrap();
    assert!(again.is_empty(), "{again:?}");
    assert_eq!(stale.files, published.files);

    let b = root.path().join("b");
    let (mut mb, _) = store.load(&b).unwrap();
    put(&b, "n.md", "v3");
    put(&a, "n.md", "v3");
    store
        .commit(&a, &mut published, OnConflict::Fail, Room::default())
        .unwrap();
    let same = store
        .commit(&b, &mut mb, OnConflict::Fail, Room::default())
        .unwrap();
    assert!(same.is_empty(), "{same:?}");
    // A different change is still one.
    put(&b, "n.md", "v4");
    put(&a, "n.md", "v5");
    store
        .commit(&a, &mut published, OnConflict::Fail, Room::default())
        .unwrap();
    let err = store
        .commit(&b, &mut mb, OnConflict::Fail, Room::default())
        .unwrap_err();
    assert!(
        matches!(err, PersistentError::Conflict(ref f) if f == &["n.md"]),
        "{err}"
    );
}

/// A commit that would grow the store past the room it has fails before anything is
/// staged; what it replaces and deletes counts for it.
#[test]
fn a_commit_larger_than_its_room_fails_whole() {
    let root = tempfile::tempdir().unwrap();
    let store = Backing::new(root.path().join("store"));
    put(store.root(), "old.md", &"o".repeat(600));
    let a = root.path().join("a");
    let (mut manifest, _) = store.load(&a).unwrap();
    put(&a, "big.md", &"b".repeat(1000));
    let room = Room {
        bytes: Some(999),
        files: None,
    };
    let err = store
        .commit(&a, &mut manifest, OnConflict::Fail, room)
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("disk quota: the commit would add 1000 bytes and 1 files"),
        "{err}"
    );
    assert_eq!(read(store.root(), "big.md"), None);
    let staged = fs::read_dir(store.root().join(HOST_DIR))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("staged-"))
        .count();
    assert_eq!(staged, 0);
    // Deleting old.md makes room for it.
    fs::remove_file(a.join("old.md")).unwrap();
    let report = store
        .commit(&a, &mut manifest, OnConflict::Fail, room)
        .unwrap();
    assert_eq!((report.created.len(), report.deleted.len()), (1, 1));
}

#[test]
fn a_commit_publishes_what_the_checkout_changed_and_only_that() {
    let root = tempfile::tempdir().unwrap();
    let store = Backing::new(root.path().join("store"));
    put(store.root(), "keep.md", "keep");
    put(store.root(), "edit.md", "v1");
    put(store.root(), "gone/old.md", "old");
    let a = root.path().join("a");
    let (mut manifest, loaded) = store.load(&a).unwrap();
    assert_eq!((loaded.files, loaded.bytes), (3, 9));
    assert_eq!(read(&a, "edit.md").as_deref(), Some("v1"));

    put(&a, "edit.md", "v2");
    put(&a, "new/deep.md", "new");
    fs::remove_file(a.join("gone/old.md")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", a.join("link")).unwrap();
    let report = store
        .commit(&a, &mut manifest, OnConflict::Fail, Room::default())
        .unwrap();
    assert_eq!(report.created, ["new/deep.md"]);
    assert_eq!(report.updated, ["edit.md"]);
    assert_eq!(report.deleted, ["gone/old.md"]);
    assert_eq!(read(store.root(), "edit.md").as_deref(), Some("v2"));
    assert_eq!(read(store.root(), "new/deep.md").as_deref(), Some("new"));
    assert!(
        !store.root().join("gone").exists(),
        "emptied directories go"
    );
    assert!(
        !store.root().join("link").exists(),
        "symlinks are not published"
    );
    let host: Vec<_> = fs::read_dir(store.root().join(HOST_DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let mut host = host;
    host.sort();
    assert_eq!(host, ["generation", "lock"], "nothing staged is left");

    // Nothing changed since: an empty commit.
    let again = store
        .commit(&a, &mut manifest, OnConflict::Fail, Room::default())
        .unwrap();
    assert!(again.is_empty(), "{again:?}");
}

#[test]
fn a_file_changed_on_both_sides_is_a_conflict_resolved_as_the_mount_says() {
    let root = tempfile::tempdir().unwrap();
    let store = Backing::new(root.path().join("store"));
    put(store.root(), "notes.md", "base");
    put(store.root(), "other.md", "base");
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let (mut ma, _) = store.load(&a).unwrap();
    let (mut mb, _) = store.load(&b).unwrap();
    put(&a, "notes.md", "from a");
    put(&b, "notes.md", "from b");
    put(&b, "other.md", "from b");
    store
        .commit(&a, &mut ma, OnConflict::Fail, Room::default())
        .unwrap();

    let err = store
        .commit(&b, &mut mb, OnConflict::Fail, Room::default())
        .unwrap_err();
    assert!(
        matches!(&err, PersistentError::Conflict(paths) if paths == &["notes.md"]),
        "{err}"
    );
    assert_eq!(read(store.root(), "notes.md").as_deref(), Some("from a"));
    assert_eq!(
        read(store.root(), "other.md").as_deref(),
        Some("base"),
        "none of it"
    );
    assert_eq!(
        read(&b, "notes.md").as_deref(),
        Some("from b"),
        "checkout kept"
    );
    // The store's version, for the session to merge from; the next commit clears it.
    let left = format!("{}/notes.md", super::THEIRS_DIR);
    assert_eq!(read(&b, &left).as_deref(), Some("from a"));
    assert_eq!(read(&b, &format!("{}/other.md", super::THEIRS_DIR)), None);

    let theirs = store
        .commit(&b, &mut mb, OnConflict::Theirs, Room::default())
        .unwrap();
    assert_eq!(theirs.kept_theirs, ["notes.md"]);
    assert_eq!(theirs.updated, ["other.md"]);
    assert_eq!(read(store.root(), "notes.md").as_deref(), Some("from a"));
    assert_eq!(read(&b, &left), None, "cleared by the next commit");
    let ours = store
        .commit(&b, &mut mb, OnConflict::Ours, Room::default())
        .unwrap();
    assert_eq!(ours.updated, ["notes.md"]);
    assert_eq!(read(store.root(), "notes.md").as_deref(), Some("from b"));
}

#[test]
fn a_refresh_brings_what_others_committed_and_keeps_what_the_session_changed() {
    let root = tempfile::tempdir().unwrap();
    let store = Backing::new(root.path().join("store"));
    put(store.root(), "shared.md", "v1");
    put(store.root(), "mine.md", "v1");
    put(store.root(), "dropped.md", "v1");
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let (mut ma, _) = store.load(&a).unwrap();
    let (mut mb, _) = store.load(&b).unwrap();
    assert_eq!(
        store.refresh(&b, &mut mb).unwrap(),
        0,
        "nothing committed yet"
    );
    put(&a, "shared.md", "from a");
    put(&a, "mine.md", "from a");
    put(&a, "new.md", "from a");
    fs::remove_file(a.join("dropped.md")).unwrap();
    store
        .commit(&a, &mut ma, OnConflict::Fail, Room::default())
        .unwrap();

    put(&b, "mine.md", "from b");
    assert_eq!(store.refresh(&b, &mut mb).unwrap(), 3);
    assert_eq!(read(&b, "shared.md").as_deref(), Some("from a"));
    assert_eq!(read(&b, "new.md").as_deref(), Some("from a"));
    assert_eq!(read(&b, "dropped.md"), None);
    assert_eq!(
        read(&b, "mine.md").as_deref(),
        Some("from b"),
        "b's change kept"
    );
    let err = store
        .commit(&b, &mut mb, OnConflict::Fail, Room::default())
        .unwrap_err();
    assert!(
        matches!(&err, PersistentError::Conflict(p) if p == &["mine.md"]),
        "{err}"
    );
}

/// Attack 1 of issue 39: a session plants a link to a host directory; another
/// publishes a file at a path through it; the first one's refresh keeps that file out
/// of its checkout instead of writing it where the link points. A file it loaded, on a
/// way it turned into a link, is kept out too, and meets the store's change as a
/// conflict at its commit.
#[test]
fn a_refresh_never_writes_through_a_symlink_the_session_planted() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let store = Backing::new(root.path().join("store"));
    put(store.root(), "d/x.md", "v1");
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let (mut ma, _) = store.load(&a).unwrap();
    let (mut mb, _) = store.load(&b).unwrap();
    std::os::unix::fs::symlink(outside.path(), a.join("evil")).unwrap();
    fs::rename(a.join("d"), a.join("d.mine")).unwrap();
    std::os::unix::fs::symlink(outside.path(), a.join("d")).unwrap();
    put(&b, "evil/planted.txt", "X");
    put(&b, "d/x.md", "v2");
    store
        .commit(&b, &mut mb, OnConflict::Fail, Room::default())
        .unwrap();

    assert_eq!(store.refresh(&a, &mut ma).unwrap(), 0);
    let left: Vec<_> = fs::read_dir(outside.path()).unwrap().collect();
    assert!(left.is_empty(), "written through a link: {left:?}");
    assert!(fs::symlink_metadata(a.join("evil")).unwrap().is_symlink());
    let err = store
        .commit(&a, &mut ma, OnConflict::Fail, Room::default())
        .unwrap_err();
    assert!(
        matches!(&err, PersistentError::Conflict(p) if p == &["d/x.md"]),
        "{err}"
    );
}

/// A checkout a load finds already there (a crash before its manifest) may hold links:
/// the load replaces what is at a file's name, never writes through a link on its way.
#[test]
fn a_load_never_writes_through_a_symlink_in_the_checkout() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let store = Backing::new(root.path().join("store"));
    put(store.root(), "notes/a.md", "a");
    put(store.root(), "top.md", "top");
    let a = root.path().join("a");
    fs::create_dir(&a).unwrap();
    std::os::unix::fs::symlink(outside.path(), a.join("notes")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("top.md"), a.join("top.md")).unwrap();
    let (manifest, loaded) = store.load(&a).unwrap();
    assert_eq!(loaded.files, 1);
    assert_eq!(manifest.files.keys().collect::<Vec<_>>(), ["top.md"]);
    assert_eq!(read(&a, "top.md").as_deref(), Some("top"));
    assert!(fs::symlink_metadata(a.join("top.md")).unwrap().is_file());
    let left: Vec<_> = fs::read_dir(outside.path()).unwrap().collect();
    assert!(left.is_empty(), "written through a link: {left:?}");
}

/// Attack 2 of issue 39, made deterministic: between the walk that lists a changed
/// file and the copy of it, the session swaps its directory for a link to a host
/// directory holding a file of the same name. The copy never reads through the link.
#[test]
fn a_directory_swapped_for_a_symlink_after_the_walk_is_never_copied_through() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("f.txt"), "HOST-SECRET").unwrap();
    let store = Backing::new(root.path().join("store"));
    let a = root.path().join("a");
    let (mut manifest, _) = store.load(&a).unwrap();
    put(&a, "real/f.txt", "mine");
    let checkout = Checkout::open(&a).unwrap();
    let listed = changes(&checkout, &manifest).unwrap();
    let [(relative, Change::Put { now, .. })] = listed.as_slice() else {
        panic!("{:?}", listed.iter().map(|(r, _)| r).collect::<Vec<_>>());
    };
    // The swap: `real` is now a link to the host directory.
    fs::rename(a.join("real"), a.join("swap")).unwrap();
    std::os::unix::fs::symlink(outside.path(), a.join("real")).unwrap();
    let to = root.path().join("staged");
    let err = checkout.stage(relative, *now, &to).unwrap_err();
    assert!(
        matches!(&err, PersistentError::Io { source, .. } if beneath::crosses(source)),
        "{err}"
    );
    assert!(!to.exists());
    // Nor does a whole commit, whose walk now meets the link: it publishes the
    // directory where it is now, and nothing of what the link points to.
    let report = store
        .commit(&a, &mut manifest, OnConflict::Fail, Room::default())
        .unwrap();
    assert_eq!(report.created, ["swap/f.txt"]);
    assert_eq!(read(store.root(), "swap/f.txt").as_deref(), Some("mine"));
    assert_eq!(read(store.root(), "real/f.txt"), None);
    // A file replaced since the walk (another inode) is not published in its stead.
    fs::remove_file(a.join("real")).unwrap();
    put(&a, "real/f.txt", "mine");
    let listed = changes(&checkout, &manifest).unwrap();
    let [(relative, Change::Put { now, .. })] = listed.as_slice() else {
        panic!("{:?}", listed.iter().map(|(r, _)| r).collect::<Vec<_>>());
    };
    put(&a, "real/g.txt", "other");
    fs::rename(a.join("real/g.txt"), a.join("real/f.txt")).unwrap();
    assert!(checkout.stage(relative, *now, &to).is_err());
}

#[test]
fn a_commit_stopped_after_its_journal_is_completed_and_one_stopped_before_never_was() {
    let root = tempfile::tempdir().unwrap();
    let store = Backing::new(root.path().join("store"));
    put(store.root(), "a.md", "v1");
    let (_, _) = store.load(&root.path().join("x")).unwrap();
    let host = store.root().join(HOST_DIR);

    // Staged, journaled, not applied: the next lock rolls it forward.
    fs::create_dir_all(host.join("staged-1")).unwrap();
    fs::write(host.join("staged-1/0"), "v2").unwrap();
    let journal = Journal {
        puts: vec![("0".into(), "a.md".into())],
        deletes: vec![],
    };
    fs::write(
        host.join("journal-1.json"),
        serde_json::to_vec(&journal).unwrap(),
    )
    .unwrap();
    // Staged without a journal: swept.
    fs::create_dir_all(host.join("staged-2")).unwrap();
    fs::write(host.join("staged-2/0"), "never").unwrap();

    let (_, loaded) = store.load(&root.path().join("y")).unwrap();
    assert_eq!(loaded.files, 1);
    assert_eq!(read(&root.path().join("y"), "a.md").as_deref(), Some("v2"));
    let mut left: Vec<_> = fs::read_dir(&host)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    left.sort();
    assert_eq!(left, ["generation", "lock"]);
}
