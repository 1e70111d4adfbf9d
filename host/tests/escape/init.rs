//! Property: the sandbox's PID 1 and its launcher are out of a command's reach: they
//! cannot be traced, injected into or stopped, so nothing a command does survives into
//! the session's next command through them; and what a command writes to PID 1's stderr
//! (`/proc/1/fd/2`, hookhost's log) reaches the log bounded and labelled with its session.

use crate::harness::{self, Host};

#[test]
#[cfg(target_arch = "x86_64")]
fn pid_1_and_the_launcher_cannot_be_traced_or_stopped() {
    for who in harness::users() {
        let host = Host::new(who, "");
        let session = host.session("alpha");
        let probed = harness::probe(
            &host,
            "alpha",
            &session,
            &[
                "ptrace-attach-pid1",
                "ptrace-attach-pid2",
                "process_vm_readv-pid1",
            ],
        );
        for [name, returned, error] in &probed {
            assert_eq!(
                (returned.as_str(), error.as_str()),
                ("-1", "EPERM"),
                "{who:?}: {name}"
            );
        }
        let (said, _) = host.bash(
            "alpha",
            &session,
            "kill -STOP 1; kill -KILL 1; sleep 0.2; grep ^State /proc/1/status; \
             ls /proc/1/fd/ 2>&1 | head -1",
        );
        assert!(
            said.contains("State:\tS"),
            "{who:?}: PID 1 was stopped or killed: {said}"
        );
    }
}

#[test]
fn what_a_command_writes_to_pid_1s_stderr_reaches_the_log_bounded() {
    let host = Host::new(harness::As::Invoker, "");
    let session = host.session("alpha");
    let args = serde_json::json!({
        "command": "for i in $(seq 1 5000); do echo flood-$i > /proc/1/fd/2; done 2>/dev/null; \
                    head -c 100000 /dev/zero | tr '\\0' x > /proc/1/fd/2 2>/dev/null; echo done"
    })
    .to_string();
    let out = host.run(&[
        "call",
        "--tenant",
        "alpha",
        "--session",
        &session,
        "bash",
        &args,
    ]);
    assert_eq!(harness::text(&out.stdout), "done\n");
    let log = harness::log_of(&out);
    let flood: Vec<&String> = log.iter().filter(|l| l.contains("flood-")).collect();
    assert!(
        flood.len() <= 20,
        "{} lines of the flood were logged",
        flood.len()
    );
    assert!(
        log.iter().all(|l| l.len() < 4096),
        "a line of 100,000 bytes was logged whole"
    );
    assert!(
        flood.iter().all(|l| l.contains(&session)),
        "the log does not name the session: {flood:?}"
    );
}
