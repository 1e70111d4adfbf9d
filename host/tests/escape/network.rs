//! Property: a command never shares the host's network namespace. With the network
//! closed (the default) it reaches no socket of the host: not a TCP listener on the host's
//! loopback (`/dev/tcp`), not an abstract Unix socket, not a netlink socket. With the
//! network open (`network = true`) it reaches the host's other addresses as a machine on
//! its network would, through a namespace of its own, and still neither the host's
//! loopback nor its abstract sockets.

use crate::harness::{self, Host};
use std::net::{IpAddr, TcpListener};
use std::os::unix::net::UnixListener;

#[test]
fn a_closed_network_reaches_no_host_socket() {
    let (listener, port) = listen("127.0.0.1".parse().unwrap());
    let (abstract_socket, name) = abstract_socket("closed");
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

#[test]
fn an_open_network_is_a_namespace_of_its_own() {
    let (loopback, loopback_port) = listen("127.0.0.1".parse().unwrap());
    let (outward, outward_port) = listen(crate::common::outward_address());
    let outward_ip = outward.local_addr().unwrap().ip();
    let (abstract_socket, name) = abstract_socket("open");
    let host_netns = std::fs::read_link("/proc/self/ns/net").unwrap();
    for who in harness::users() {
        let host = Host::new(who, "\n[tenants.alpha.bash]\nnetwork = true\n");
        let session = host.session("alpha");
        let (said, _) = host.bash(
            "alpha",
            &session,
            &format!(
                "readlink /proc/self/ns/net; \
                 echo hi > /dev/tcp/{outward_ip}/{outward_port} && echo outward-reached; \
                 echo hi > /dev/tcp/127.0.0.1/{loopback_port} && echo loopback-connected; \
                 echo hi > /dev/tcp/10.0.2.2/{loopback_port} && echo gateway-connected; \
                 python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); \
                 s.connect(\"\\0{name}\"); print(\"unix-connected\")'; \
                 cat /etc/resolv.conf"
            ),
        );
        assert!(said.contains("outward-reached"), "{who:?}: {said}");
        assert!(outward.accept().is_ok(), "{who:?}: {said}");
        assert!(!said.contains("connected"), "{who:?}: {said}");
        assert!(
            !said.contains(host_netns.to_str().unwrap()),
            "{who:?}: the host's network namespace: {said}"
        );
        assert!(said.contains("nameserver 10.0.2.3"), "{who:?}: {said}");
        assert!(
            loopback.accept().is_err(),
            "{who:?}: the host's loopback was reached"
        );
        assert!(
            abstract_socket.accept().is_err(),
            "{who:?}: the abstract socket was reached"
        );
    }
}

/// A listener on `ip`, not blocking, and its port.
fn listen(ip: IpAddr) -> (TcpListener, u16) {
    let listener = TcpListener::bind((ip, 0)).unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// An abstract Unix socket of the host, not blocking, and its name.
fn abstract_socket(test: &str) -> (UnixListener, String) {
    use std::os::linux::net::SocketAddrExt;
    let name = format!("hookhost-escape-{test}-{}", std::process::id());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let socket = UnixListener::bind_addr(&address).unwrap();
    socket.set_nonblocking(true).unwrap();
    (socket, name)
}

/// Property: slirp4netns ends with its sandbox, even when hookhost is killed with
/// `SIGKILL` mid-command (its exit pipe closes with hookhost).
#[test]
fn the_network_ends_when_the_host_is_killed() {
    for who in harness::users() {
        let host = Host::new(who, "\n[tenants.alpha.bash]\nnetwork = true\n");
        let session = host.session("alpha");
        let mut call = host
            .bash_call("alpha", &session, "sleep 60")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let host_pid = call.id() as i32;
        // Bounded: a one-shot call compiles its components into a new cache first.
        let slirp = (0..600)
            .find_map(|_| {
                std::thread::sleep(std::time::Duration::from_millis(100));
                child_named(host_pid, "slirp4netns")
            })
            .unwrap_or_else(|| panic!("{who:?}: no slirp4netns started"));
        call.kill().unwrap();
        call.wait().unwrap();
        let gone = (0..100).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            !crate::common::alive(slirp)
        });
        assert!(gone, "{who:?}: slirp4netns {slirp} outlived its host");
    }
}

/// A child process of `parent` whose name is `name`.
fn child_named(parent: i32, name: &str) -> Option<i32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let status = std::fs::read_to_string(entry.path().join("status")).ok()?;
            let field = |key: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(key))
                    .map(str::trim)
                    .map(str::to_string)
            };
            (field("Name:")? == name && field("PPid:")? == parent.to_string()).then_some(pid)
        })
}

/// Property: sandboxes with open networks at once each get their own, and all reach out.
#[test]
fn many_open_networks_at_once() {
    const SESSIONS: usize = 8;
    let (outward, port) = listen(crate::common::outward_address());
    let ip = outward.local_addr().unwrap().ip();
    let host = Host::new(
        harness::As::Invoker,
        "\n[tenants.alpha.bash]\nnetwork = true\n",
    );
    let namespaces: Vec<String> = std::thread::scope(|scope| {
        let calls: Vec<_> = (0..SESSIONS)
            .map(|_| {
                scope.spawn(|| {
                    let session = host.session("alpha");
                    let command =
                        format!("echo hi > /dev/tcp/{ip}/{port} && readlink /proc/self/ns/net");
                    host.bash("alpha", &session, &command).0
                })
            })
            .collect();
        calls.into_iter().map(|c| c.join().unwrap()).collect()
    });
    let mut distinct = namespaces.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), SESSIONS, "{namespaces:?}");
    let reached = (0..SESSIONS).filter(|_| outward.accept().is_ok()).count();
    assert_eq!(reached, SESSIONS, "{namespaces:?}");
}
