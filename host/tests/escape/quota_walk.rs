//! What a session writes is counted however it hides it, and deleting the session leaves
//! nothing of it: a file below a directory chain longer than `PATH_MAX`, and files in
//! directories the session made unreadable (`chmod 000`, written through a descriptor
//! opened before) count in `session show`, and `session delete` removes them all.

use crate::harness::{self, Host, text};

/// What a sparse file of this size counts, without writing it.
const BIG: u64 = 300 * 1024 * 1024;

/// The bytes `session show` counts in `session` of `alpha`.
fn counted(host: &Host, session: &str) -> u64 {
    let out = host.run(&["session", "show", "--tenant", "alpha", session]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    shown
        .lines()
        .find_map(|l| l.strip_prefix("disk: "))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no disk line in {shown}"))
}

/// Deletes `session` of `alpha` and checks that its directories are gone.
fn deleted_whole(host: &Host, session: &str, who: harness::As) {
    let out = host.run(&["session", "delete", "--tenant", "alpha", session]);
    assert!(
        out.status.success(),
        "{who:?}: session delete failed: {}",
        text(&out.stderr)
    );
    let dir = host.dir("alpha", session, "workspace");
    assert!(
        !dir.exists(),
        "{who:?}: {} is left after the delete",
        dir.display()
    );
}

#[test]
fn a_file_below_a_chain_longer_than_path_max_is_counted_and_deleted() {
    for who in harness::users() {
        let host = Host::new(who, "");
        let s = host.session("alpha");
        // 480 levels of 10-byte names: 5,280 bytes of path, past PATH_MAX (4,096).
        let (out, failed) = host.bash(
            "alpha",
            &s,
            &format!(
                "python3 - <<'EOF'\nimport os\nos.chdir('/workspace')\nfor _ in range(480):\n    \
                 os.mkdir('aaaaaaaaaa')\n    os.chdir('aaaaaaaaaa')\n\
                 open('big', 'wb').truncate({BIG})\nprint('deep')\nEOF"
            ),
        );
        assert!(!failed && out.contains("deep"), "{who:?}: {out}");
        let bytes = counted(&host, &s);
        assert!(
            bytes >= BIG,
            "{who:?}: {bytes} bytes counted of {BIG} written"
        );
        deleted_whole(&host, &s, who);
    }
}

#[test]
fn files_in_directories_made_unreadable_are_counted_and_deleted() {
    for who in harness::users() {
        let host = Host::new(who, "");
        let s = host.session("alpha");
        // `hid`: mode 000, written through a descriptor opened before; `ro`: no write
        // bit on the directory, a file of mode 000 in it; `deep/x`: 000 inside 000.
        let (out, failed) = host.bash(
            "alpha",
            &s,
            &format!(
                "python3 - <<'EOF'\nimport os\nos.chdir('/workspace')\n\
                 os.makedirs('hid'); f = open('hid/big', 'wb'); os.chmod('hid', 0)\n\
                 f.truncate({BIG}); f.close()\n\
                 os.makedirs('ro'); open('ro/f', 'w').write('x'); os.chmod('ro/f', 0); os.chmod('ro', 0o500)\n\
                 os.makedirs('deep/x'); open('deep/x/f', 'w').write('y'); os.chmod('deep/x', 0); os.chmod('deep', 0)\n\
                 print('hidden')\nEOF"
            ),
        );
        assert!(!failed && out.contains("hidden"), "{who:?}: {out}");
        let bytes = counted(&host, &s);
        assert!(
            bytes >= BIG + 2,
            "{who:?}: {bytes} bytes counted of {BIG} written"
        );
        deleted_whole(&host, &s, who);
    }
}

/// Space reserved past a file's end (`fallocate --keep-size`) is disk the file holds: it
/// counts, though the file's size stays 0.
#[test]
fn space_reserved_past_a_files_end_is_counted() {
    for who in harness::users() {
        let host = Host::new(who, "");
        let s = host.session("alpha");
        let (out, failed) = host.bash(
            "alpha",
            &s,
            "touch reserved && fallocate -n -l 200M reserved && stat -c %s reserved",
        );
        assert!(!failed && out == "0\n", "{who:?}: {out}");
        let bytes = counted(&host, &s);
        assert!(
            bytes >= 200 * 1024 * 1024,
            "{who:?}: 200 MiB reserved, {bytes} bytes counted"
        );
        deleted_whole(&host, &s, who);
    }
}
