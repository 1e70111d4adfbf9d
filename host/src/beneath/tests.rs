use super::*;
use std::os::unix::fs::PermissionsExt;

fn paths(root: &Path, how: Walk) -> Vec<String> {
    let dir = open_root(root, false).unwrap();
    let mut found = Vec::new();
    walk(&dir, how, &mut |e: &Entry<'_>| {
        found.push(String::from_utf8_lossy(e.path).into_owned());
        Ok(true)
    })
    .unwrap();
    found.sort();
    found
}

/// A chain of `depth` directories named `name` below `root`, made through descriptors
/// (its path is longer than `PATH_MAX`); returns the deepest.
fn chain(root: &Path, name: &str, depth: usize) -> OwnedFd {
    let mut dir = open_root(root, false).unwrap();
    for _ in 0..depth {
        rustix::fs::mkdirat(&dir, name, Mode::RWXU).unwrap();
        dir = open_dir_in(&dir, OsStr::new(name)).unwrap();
    }
    dir
}

#[test]
fn a_walk_reports_symlinks_and_never_walks_into_them() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("a/b")).unwrap();
    std::fs::write(root.path().join("a/b/f"), "x").unwrap();
    std::os::unix::fs::symlink("/etc", root.path().join("a/etc")).unwrap();
    assert_eq!(
        paths(root.path(), Walk::EXACT),
        ["a", "a/b", "a/b/f", "a/etc"]
    );
}

/// 3,000 levels of 10-byte names: 33,000 bytes of path, eight times `PATH_MAX`, and
/// far more directories than the walk keeps open.
#[test]
fn a_tree_deeper_than_path_max_is_walked_whole_and_removed() {
    let root = tempfile::tempdir().unwrap();
    let deepest = chain(root.path(), "aaaaaaaaaa", 3000);
    replace(&deepest, "f", ".f.tmp", Mode::RUSR | Mode::WUSR, |f| {
        io::Write::write_all(f, b"12345")
    })
    .unwrap();
    let dir = open_root(root.path(), false).unwrap();
    let (mut entries, mut bytes, mut deepest_path) = (0, 0, 0);
    walk(&dir, Walk::EXACT, &mut |e: &Entry<'_>| {
        entries += 1;
        if e.is_file() {
            bytes += e.stat.st_size;
            deepest_path = e.path.len();
        }
        Ok(true)
    })
    .unwrap();
    assert_eq!((entries, bytes, deepest_path), (3001, 5, 3000 * 11 + 1));
    remove(&dir, OsStr::new("aaaaaaaaaa")).unwrap();
    assert!(paths(root.path(), Walk::EXACT).is_empty());
}

/// A session (of a host that is not root) hides what it wrote behind directories it
/// made unreadable; a walk that must see everything gives them back, one that need
/// not leaves them be.
#[test]
fn directories_made_unreadable_are_walked_and_removed_whole() {
    as_ordinary_user(
        "beneath::tests::directories_made_unreadable_are_walked_and_removed_whole",
        unreadable_directories,
    );
}

fn unreadable_directories(root: &Path) {
    let at = |p: &str| root.join(p);
    std::fs::create_dir_all(at("t/hid/deeper")).unwrap();
    std::fs::create_dir_all(at("t/ro")).unwrap();
    std::fs::create_dir_all(at("t/x")).unwrap();
    std::fs::write(at("t/hid/deeper/f"), "12345").unwrap();
    std::fs::write(at("t/ro/f"), "1").unwrap();
    std::fs::write(at("t/x/f"), "1").unwrap();
    let mode = |p: &str, m: u32| {
        std::fs::set_permissions(at(p), std::fs::Permissions::from_mode(m)).unwrap()
    };
    mode("t/ro/f", 0o000);
    mode("t/hid/deeper", 0o000);
    mode("t/hid", 0o000);
    mode("t/ro", 0o500);
    mode("t/x", 0o100);
    let tree = open_root(&at("t"), false).unwrap();
    assert!(walk(&tree, Walk::EXACT, &mut |_: &Entry<'_>| Ok(true)).is_err());
    let mut bytes = 0;
    let mut entries = 0;
    walk(&tree, Walk::EVERYTHING, &mut |e: &Entry<'_>| {
        entries += 1;
        if e.is_file() {
            bytes += e.stat.st_size;
        }
        Ok(true)
    })
    .unwrap();
    assert_eq!((entries, bytes), (7, 7));
    mode("t/hid/deeper", 0o000);
    mode("t/hid", 0o000);
    mode("t", 0o000);
    let top = open_root(root, false).unwrap();
    remove(&top, OsStr::new("t")).unwrap();
    assert!(!at("t").exists());
}

/// The levels past the descriptors a walk keeps are reopened through `..` only when
/// that is the directory left: one moved away meanwhile is not climbed out of.
#[test]
fn a_walk_never_climbs_out_of_a_directory_moved_away_while_it_was_walked() {
    let top = tempfile::tempdir().unwrap();
    let (root, away) = (top.path().join("tree"), top.path().join("away"));
    std::fs::create_dir(&root).unwrap();
    std::fs::create_dir(&away).unwrap();
    drop(chain(&root, "d", 100));
    let level = WALK_OPEN_DIRS + 2;
    let moved = root.join(vec!["d"; level].join("/"));
    // Beside the directory moved, others still to walk once it is done (listed after
    // it: made until one is); `away` has the same names. Reopened as `away`, its
    // parent would lead there.
    let parent = moved.parent().unwrap();
    let listed_after = || {
        let names: Vec<_> = std::fs::read_dir(parent)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.iter().position(|n| n == "d") < Some(names.len() - 1)
    };
    let mut siblings = 0;
    while !listed_after() && siblings < 1000 {
        let name = format!("z{siblings}");
        std::fs::create_dir(parent.join(&name)).unwrap();
        std::fs::create_dir(away.join(&name)).unwrap();
        std::fs::write(away.join(&name).join("marker"), "not the tree's").unwrap();
        siblings += 1;
    }
    assert!(listed_after());
    let (mut seen, mut done) = (Vec::new(), false);
    let tree = open_root(&root, false).unwrap();
    walk(&tree, Walk::EXACT, &mut |e: &Entry<'_>| {
        seen.push(String::from_utf8_lossy(e.path).into_owned());
        if !done && e.path.len() > 2 * (level + 4) {
            std::fs::rename(&moved, away.join("d"))?;
            done = true;
        }
        Ok(true)
    })
    .unwrap();
    assert!(done);
    assert!(seen.iter().all(|p| !p.contains("marker")), "{seen:?}");
    assert_eq!(
        seen.len(),
        100 + siblings,
        "what moved is walked to its end"
    );
}

/// A directory of hookhost's user's is given back; nothing else is, and never through
/// a symlink.
#[test]
fn a_hidden_directory_is_given_back_but_a_symlink_to_one_is_not_followed() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o500)).unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("link")).unwrap();
    let top = open_root(root.path(), false).unwrap();
    assert!(dir_at(top.as_fd(), c"link", true).is_err());
    remove(&top, OsStr::new("link")).unwrap();
    let mode = std::fs::metadata(outside.path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o500, "the link's target is left as it was");
    assert!(outside.path().exists());
}

#[test]
fn a_file_is_opened_beneath_through_no_symlink() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("f"), "secret").unwrap();
    std::fs::create_dir(root.path().join("real")).unwrap();
    std::fs::write(root.path().join("real/f"), "mine").unwrap();
    std::os::unix::fs::symlink(outside.path(), root.path().join("swap")).unwrap();
    std::os::unix::fs::symlink("real/f", root.path().join("alias")).unwrap();
    let top = open_root(root.path(), false).unwrap();
    assert!(open_file(&top, "real/f").is_ok());
    for refused in ["swap/f", "alias", "../f"] {
        let e = open_file(&top, refused).unwrap_err();
        assert!(crosses(&e), "{refused}: {e}");
    }
    assert!(stat(&top, "alias").unwrap().is_some(), "the link itself");
    assert!(crosses(&stat(&top, "swap/f").unwrap_err()));
    assert!(make_dirs(&top, "swap/new").unwrap().is_none());
    assert!(make_dirs(&top, "real/f/new").unwrap().is_none());
    assert!(!outside.path().join("new").exists());
    let made = make_dirs(&top, "n/e/w").unwrap().unwrap();
    replace(&made, "f", ".tmp", Mode::RUSR | Mode::WUSR, |f| {
        io::Write::write_all(f, b"new")
    })
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(root.path().join("n/e/w/f")).unwrap(),
        "new"
    );
    // A file written where a symlink is replaces the link.
    replace(&top, "swap", ".tmp", Mode::RUSR | Mode::WUSR, |f| {
        io::Write::write_all(f, b"over")
    })
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(outside.path().join("f")).unwrap(),
        "secret"
    );
    assert!(
        std::fs::symlink_metadata(root.path().join("swap"))
            .unwrap()
            .is_file()
    );
}
