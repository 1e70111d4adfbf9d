//! Property: a command that makes 200,000 files costs the host a bounded walk: the call
//! returns, the next call of the session and another tenant's calls run, and deleting the
//! session leaves nothing.

use crate::harness::{self, Host};

#[test]
fn two_hundred_thousand_files_are_made_traced_and_deleted() {
    for who in harness::users() {
        let host = Host::new(who, "");
        let alpha = host.session("alpha");
        let beta = host.session("beta");
        let (said, failed) = host.bash(
            "alpha",
            &alpha,
            "mkdir many && cd many && seq 1 200000 | xargs touch && ls | wc -l",
        );
        assert!(!failed && said == "200000\n", "{who:?}: {said}");
        assert_eq!(host.bash("beta", &beta, "echo beta").0, "beta\n", "{who:?}");
        assert_eq!(
            host.bash("alpha", &alpha, "echo again").0,
            "again\n",
            "{who:?}"
        );
        let deleted = host.run(&["session", "delete", &alpha, "--tenant", "alpha"]);
        assert!(
            deleted.status.success(),
            "{who:?}: {}",
            harness::text(&deleted.stderr)
        );
        assert!(!host.dir("alpha", &alpha, "workspace").exists(), "{who:?}");
    }
}
