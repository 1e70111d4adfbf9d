//! Property: no process of a sandbox shows a host path on its command line: not the data
//! directory, the session's directories or the hookhost program.

use crate::harness::{self, Host};

#[test]
fn no_command_line_inside_shows_a_host_path() {
    for who in harness::users() {
        let host = Host::new(who, "");
        let session = host.session("alpha");
        let (lines, _) = host.bash("alpha", &session, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '");
        let program = harness::program();
        for host_path in [host.data().to_str().unwrap(), &program, &session] {
            assert!(
                !lines.contains(host_path),
                "{who:?}: {host_path} in {lines}"
            );
        }
    }
}
