//! Property: nothing a command leaves reaches the session's next command or holds the
//! host's memory once it returned: processes (background, `setsid`, double-forked),
//! files in `/tmp` and `/dev/shm`, System V shared memory, message queues and semaphores,
//! POSIX message queues.

use crate::harness::{self, Host};

const LEAVE: &str = r#"
python3 - <<'LEAVE'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
# System V: a 64 MiB shared memory segment, touched; a message queue; a semaphore set.
shm = libc.shmget(0x4242, 64 << 20, 0o1600)
libc.shmat.restype = ctypes.c_void_p
at = libc.shmat(shm, None, 0)
ctypes.memset(at, 1, 64 << 20)
msg = libc.msgget(0x4343, 0o1600)
sem = libc.semget(0x4444, 1, 0o1600)
# POSIX: a message queue (/dev/mqueue) and shared memory (/dev/shm).
libc.mq_open.restype = ctypes.c_int
mq = libc.mq_open(b"/hookhost-left", os.O_CREAT | os.O_RDWR, 0o600, None)
open("/dev/shm/left", "w").write("x")
open("/tmp/left", "w").write("x")
print("made", shm >= 0, msg >= 0, sem >= 0, mq >= 0)
LEAVE
(sleep 300 &) ; setsid sleep 301 &
"#;

const LOOK: &str = "cat /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem | grep -v '^ *key' ; \
                    ls -A /dev/mqueue /dev/shm /tmp; ps -e -o comm= | grep -c sleep; true";

#[test]
fn the_next_command_finds_no_process_file_or_ipc_object_the_last_one_left() {
    for who in harness::users() {
        let host = Host::new(who, "");
        let session = host.session("alpha");
        let (made, failed) = host.bash("alpha", &session, LEAVE);
        assert!(
            !failed && made.starts_with("made True True True True"),
            "{who:?}: {made}"
        );
        let (found, _) = host.bash("alpha", &session, LOOK);
        assert_eq!(
            found, "/dev/mqueue:\n\n/dev/shm:\n\n/tmp:\n0\n",
            "{who:?}: left behind"
        );
    }
}
