//! Property: a command's processes stay within its limits and die with it: a fork bomb
//! ends at `processes` while another tenant's command runs, and nothing started in the
//! background, in a session of its own or double-forked outlives the call.

use crate::harness::{self, Host};
use std::time::Duration;

#[test]
fn a_fork_bomb_stays_bounded_and_nothing_outlives_its_call() {
    for who in harness::users() {
        let host = Host::new(who, "\n[tenants.alpha.bash]\nlimits = { processes = 64 }\n");
        let alpha = host.session("alpha");
        let beta = host.session("beta");
        std::thread::scope(|scope| {
            let bomb = scope.spawn(|| {
                host.bash(
                    "alpha",
                    &alpha,
                    // Once the bomb holds every process a shell cannot fork (bash gives
                    // up after its retries and exits 254), so the bomb goes off in a
                    // subshell, forked before it, and the command's own shell forks
                    // nothing after: it waits for that subshell (which waits for a sleep
                    // started before the bomb, or dies of it), then reads the first of
                    // the refusals (as many as the machine's speed allows, enough to be
                    // offloaded) from the file they went to, and says it.
                    "( sleep 3 & waited=$!; :(){ :|:& }; :; wait $waited ) 2>/tmp/bomb; \
                     read -r first < /tmp/bomb; echo \"$first\"; echo the-bomb-ran-out",
                )
            });
            std::thread::sleep(Duration::from_secs(1));
            let (meanwhile, failed) = host.bash("beta", &beta, "echo beta-ok");
            assert!(!failed && meanwhile == "beta-ok\n", "{who:?}: {meanwhile}");
            let (said, _) = bomb.join().unwrap();
            assert!(said.contains("the-bomb-ran-out"), "{who:?}: {said}");
            assert!(
                said.contains("Resource temporarily unavailable"),
                "{who:?}: {said}"
            );
        });
        let marker = format!("hookhost-escape-{}", std::process::id());
        let (said, _) = host.bash(
            "alpha",
            &alpha,
            &format!(
                "(exec -a {marker} sleep 300 &); setsid bash -c 'exec -a {marker} sleep 301' & \
                 nohup bash -c '(exec -a {marker} sleep 302 &)' >/dev/null 2>&1; echo started"
            ),
        );
        assert!(said.starts_with("started"), "{who:?}: {said}");
        let alive = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                std::fs::read(e.path().join("cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&marker))
            })
            .count();
        assert_eq!(alive, 0, "{who:?}: a background process outlived its call");
    }
}
