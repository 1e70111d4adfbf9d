//! Property: the sandbox's PID 1 (hookhost's launcher; no unfiltered init of bubblewrap's)
//! is out of a command's reach: it cannot be traced, its memory cannot be written
//! (`/proc/1/mem`), it cannot be stopped or killed, and its descriptors cannot be opened, so
//! nothing a command does survives into the session's next command through it and no
//! command writes to hookhost's log through it (`/proc/1/fd/2`).

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
            "exec 2>&1; kill -STOP 1; kill -KILL 1; sleep 0.2; grep ^State /proc/1/status; \
             ls -l /proc/1/fd/; python3 -c 'open(\"/proc/1/mem\", \"r+b\")'; \
             grep Seccomp: /proc/1/status /proc/self/status",
        );
        assert!(
            said.contains("State:\tS"),
            "{who:?}: PID 1 was stopped or killed: {said}"
        );
        assert!(
            said.matches("Permission denied").count() >= 2,
            "{who:?}: PID 1's descriptors or memory were opened: {said}"
        );
        assert!(
            said.contains("/proc/1/status:Seccomp:\t2\n/proc/self/status:Seccomp:\t2"),
            "{who:?}: a process of the sandbox runs without the filter: {said}"
        );
    }
}

#[test]
fn no_command_writes_to_hookhosts_log_through_pid_1() {
    let host = Host::new(harness::As::Invoker, "");
    let session = host.session("alpha");
    let args = serde_json::json!({
        "command": "{ for i in $(seq 1 500); do echo flood-$i > /proc/1/fd/2; done; \
                    printf 'flood-\\033[2J\\r' > /proc/1/fd/2; } 2>/dev/null; echo done"
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
    assert!(flood.is_empty(), "a command wrote to the log: {flood:?}");
}
