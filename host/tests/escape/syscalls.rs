//! Property: a command cannot make the system calls that reach other processes (the
//! sandbox's PID 1 and launcher included), kernel keyrings, namespaces, mounts or the
//! kernel's wider attack surface; each is refused with `EPERM` (`clone3` with `ENOSYS`,
//! so the C library falls back to `clone`), never by killing the command, and what a
//! shell needs (threads, sockets of the usual families) still works.

use crate::harness::{self, Host};

#[test]
#[cfg(target_arch = "x86_64")]
fn every_denied_system_call_is_refused_with_eperm_as_root_and_as_a_user() {
    for who in harness::users() {
        let host = Host::new(who, "");
        let session = host.session("alpha");
        let probed = harness::probe(&host, "alpha", &session, &[]);
        assert!(probed.len() > 30, "{who:?}: {probed:?}");
        for [name, returned, error] in &probed {
            let wanted = if name == "clone3" { "ENOSYS" } else { "EPERM" };
            assert_eq!(
                (returned.as_str(), error.as_str()),
                ("-1", wanted),
                "{who:?}: {name} was not refused as it should be"
            );
        }
        // What programs need still works: threads (clone3 falls back to clone), sockets.
        let (works, failed) = host.bash(
            "alpha",
            &session,
            "python3 -c 'import threading, socket; t = threading.Thread(target=print, \
             args=(\"thread\",)); t.start(); t.join(); socket.socket(); \
             socket.socket(socket.AF_UNIX); print(\"sockets\")'; unshare -r true 2>/dev/null; echo $?",
        );
        assert!(!failed, "{who:?}: {works}");
        assert!(works.starts_with("thread\nsockets\n"), "{who:?}: {works}");
        assert!(
            works.trim_end().ends_with('1'),
            "unshare -r worked: {works}"
        );
    }
}
