//! Property: no path trick reaches a file outside the session's mounts — the config, the
//! session database, another tenant's files, `/` of the host — through `..`,
//! `/proc/1/root`, `/proc/self/cwd`, symlinks planted in the workspace (by the command or
//! on the host side), hard links, or device nodes a command makes; and a FIFO planted in
//! the workspace stalls nothing of the host's.

use crate::harness::{self, Host};

#[test]
fn no_path_trick_reaches_a_host_file() {
    for who in harness::users() {
        let host = Host::new(who, "");
        let alpha = host.session("alpha");
        let beta = host.session("beta");
        let (_, failed) = host.bash("beta", &beta, "echo beta-secret > mine.txt");
        assert!(!failed, "{who:?}");
        host.bash("alpha", &alpha, "true");
        let outside = harness::host_dir();
        let secret = outside.path().join("outside.txt");
        std::fs::write(&secret, "the-host-secret\n").unwrap();
        let targets = [
            host.config.display().to_string(),
            host.data().join("sessions.db").display().to_string(),
            host.dir("beta", &beta, "workspace")
                .join("mine.txt")
                .display()
                .to_string(),
            secret.display().to_string(),
        ];
        // Planted on the host side, as a user's project may hold them.
        let workspace = host.dir("alpha", &alpha, "workspace");
        std::os::unix::fs::symlink(&secret, workspace.join("host-link")).unwrap();
        std::os::unix::fs::symlink("/", workspace.join("root-link")).unwrap();
        let mut tricks: Vec<String> = Vec::new();
        for t in &targets {
            tricks.extend([
                format!("cat {t}"),
                format!("cat /proc/1/root{t} /proc/2/root{t}"),
                format!("cat /proc/self/cwd/../../../../../..{t}"),
                format!("cat ../../../../../../..{t}"),
                format!("ln -s {t} planted; cat planted; rm -f planted"),
                format!("ln {t} hard; cat hard; rm -f hard"),
                format!("cat root-link{t}"),
            ]);
        }
        tricks.extend([
            "cat host-link".to_string(),
            "mknod disk b 8 0 && head -c 4096 disk | strings".to_string(),
            "mknod mem c 1 1; head -c 64 mem".to_string(),
            "grep -rsl -e beta-secret -e the-host-secret / --exclude-dir=proc".to_string(),
        ]);
        for trick in &tricks {
            let (output, _) = host.bash("alpha", &alpha, trick);
            for secret in [
                "beta-secret",
                "the-host-secret",
                harness::BETA,
                harness::ALPHA,
                "SQLite",
            ] {
                assert!(
                    !output.contains(secret),
                    "{who:?}: `{trick}` found {secret}: {output}"
                );
            }
        }
        // A FIFO in the workspace: the next calls (trace, quota) do not hang on it.
        let (said, _) = host.bash("alpha", &alpha, "mkfifo pipe && echo made");
        assert_eq!(said, "made\n", "{who:?}");
        assert_eq!(
            host.bash("alpha", &alpha, "echo after").0,
            "after\n",
            "{who:?}"
        );
    }
}
