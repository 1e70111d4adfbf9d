//! Property: a command shares no kernel keyring with hookhost, the host or another
//! tenant: it cannot read the session keyring hookhost was started with, nor add a key
//! another tenant's command could read.

use crate::harness::{self, Host};

#[test]
#[cfg(target_arch = "x86_64")]
fn no_command_reaches_a_keyring_of_the_host_or_of_another_tenant() {
    for who in harness::users() {
        let host = Host::new(who, "");
        let alpha = host.session("alpha");
        let beta = host.session("beta");
        let added = harness::probe(&host, "beta", &beta, &["add_key-session"]);
        assert_eq!(added[0][2], "EPERM", "{who:?}: {added:?}");
        let read = harness::probe(
            &host,
            "alpha",
            &alpha,
            &[
                "keyctl-session-keyring",
                "keyctl-read-session",
                "request_key",
            ],
        );
        for [name, returned, error] in &read {
            assert_eq!(
                (returned.as_str(), error.as_str()),
                ("-1", "EPERM"),
                "{who:?}: {name}"
            );
        }
        // /proc/keys, which lists the keys a process may see, shows nothing.
        let (keys, _) = host.bash(
            "alpha",
            &alpha,
            "cat /proc/keys /proc/key-users 2>/dev/null | wc -c",
        );
        assert_eq!(keys, "0\n", "{who:?}");
    }
}
