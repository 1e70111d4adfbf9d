//! Property: with the network closed (the default), a command reaches no socket of the
//! host: not a TCP listener on the host's loopback (`/dev/tcp`), not an abstract Unix
//! socket, not a netlink socket.

use crate::harness::{self, Host};

#[test]
fn a_closed_network_reaches_no_host_socket() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let name = format!("hookhost-escape-{}", std::process::id());
    let abstract_socket = {
        use std::os::linux::net::SocketAddrExt;
        let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        std::os::unix::net::UnixListener::bind_addr(&address).unwrap()
    };
    abstract_socket.set_nonblocking(true).unwrap();
    for who in harness::users() {
        let host = Host::new(who, "");
        let session = host.session("alpha");
        let (said, _) = host.bash(
            "alpha",
            &session,
            &format!(
                "echo hi > /dev/tcp/127.0.0.1/{port} && echo tcp-connected; \
                 python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); \
                 s.connect(\"\\0{name}\"); print(\"unix-connected\")'; \
                 ip link 2>&1 | head -1"
            ),
        );
        assert!(!said.contains("connected"), "{who:?}: {said}");
        assert!(
            listener.accept().is_err(),
            "{who:?}: the host's listener was reached"
        );
        assert!(
            abstract_socket.accept().is_err(),
            "{who:?}: the abstract socket was reached"
        );
    }
}
