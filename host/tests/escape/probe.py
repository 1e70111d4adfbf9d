# Tries system calls a sandboxed command should not have, one per line of output:
# NAME RETURNED ERRNO-NAME. Run inside the sandbox by the escape suite (x86_64 numbers).
import ctypes
import errno
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
buf = ctypes.create_string_buffer(64)
iov = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 64)

CALLS = {
    # other processes: the sandbox's PID 1 (bwrap) and 2 (the launcher)
    "ptrace-attach-pid1": (101, 16, 1, 0, 0),
    "ptrace-attach-pid2": (101, 16, 2, 0, 0),
    "ptrace-traceme": (101, 0, 0, 0, 0),
    "process_vm_readv-pid1": (310, 1, ctypes.addressof(iov), 1, ctypes.addressof(iov), 1, 0),
    "pidfd_getfd": (438, 0, 0, 0),
    # kernel keyrings
    "keyctl-session-keyring": (250, 0, L(-3), 0),
    "keyctl-read-session": (250, 11, L(-3), ctypes.addressof(buf), 64),
    "add_key-session": (248, b"user", b"hookhost-escape", b"secret", 6, L(-3)),
    "request_key": (249, b"user", b"hookhost-escape", 0, 0),
    # kernel attack surface
    "bpf": (321, 0, 0, 0),
    "perf_event_open": (298, 0, 0, L(-1), L(-1), 0),
    "userfaultfd": (323, 0),
    "io_uring_setup": (425, 1, 0),
    "kexec_load": (246, 0, 0, 0, 0),
    "init_module": (175, 0, 0, b""),
    "open_by_handle_at": (304, 0, 0, 0),
    # namespaces and mounts
    "mount-tmpfs": (165, b"none", b"/tmp", b"tmpfs", 0, 0),
    "umount2-proc": (166, b"/proc", 0),
    "pivot_root": (155, b"/tmp", b"/tmp"),
    "chroot": (161, b"/tmp"),
    "unshare-user": (272, 0x10000000),
    "unshare-mount": (272, 0x00020000),
    "setns": (308, 0, 0),
    "fsopen": (430, b"tmpfs", 0),
    "open_tree": (428, L(-100), b"/", 1),
    "clone-newuser": (56, 0x10000000 | 17, 0, 0, 0, 0),
    # odd personalities, other socket families
    "personality-addr-no-randomize": (135, 0x0040000),
    "socket-netlink": (41, 16, 3, 0),
    "socket-packet": (41, 17, 3, 0),
    "socket-vsock": (41, 40, 1, 0),
    "socketpair-inet": (53, 2, 1, 0, ctypes.addressof(buf)),
    # clone3's flags cannot be filtered: it answers ENOSYS, and the C library uses clone
    "clone3": (435, 0, 0),
}

names = sys.argv[1:] or list(CALLS)
for name in names:
    ctypes.set_errno(0)
    returned = libc.syscall(*CALLS[name])
    number = ctypes.get_errno()
    print(name, returned, errno.errorcode.get(number, number) if returned == -1 else "-")
