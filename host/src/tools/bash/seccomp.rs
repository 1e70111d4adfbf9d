//! The system-call filter every sandboxed command runs under: what a command has no use
//! for and an attacker would use to reach the host's kernel, another process or another
//! tenant is refused with `EPERM` (never a kill, which would look like a crash).
//!
//! The launcher installs it on itself (see [`super::launcher`]), after the last thing it
//! does that the filter refuses (joining a keyring of its own) and before it starts any
//! command, so every command and everything they start inherit it and cannot remove it.
//! The list follows what Codex's and Claude Code's Linux sandboxes and Docker's default
//! profile deny:
//! - other processes' memory and state: `ptrace` (so the sandbox's PID 1 and launcher
//!   cannot be injected into), `process_vm_readv`/`writev`, `pidfd_getfd`, `kcmp`,
//!   `process_madvise`;
//! - kernel keyrings, which are not namespaced: `keyctl`, `add_key`, `request_key`;
//! - kernel attack surface no shell needs: `bpf`, `perf_event_open`, `userfaultfd`,
//!   `io_uring_*`, module and `kexec_*` loading, `open_by_handle_at`, `acct`, `swapon`,
//!   `reboot`, `syslog`, `quotactl`, `iopl`/`ioperm`, clock setting, `vhangup`;
//! - namespaces and mounts: `mount`, `umount2`, `pivot_root`, `chroot`, the new mount
//!   API (`fsopen`…`mount_setattr`), `unshare`, `setns`, and `clone` with any
//!   `CLONE_NEW*` flag; `clone3`, whose flags a filter cannot see, answers `ENOSYS`, on
//!   which the C library falls back to `clone`;
//! - `personality` but the harmless settings (no `ADDR_NO_RANDOMIZE`,
//!   `READ_IMPLIES_EXEC`);
//! - sockets of families other than `AF_UNIX`, `AF_INET` and `AF_INET6` (netlink,
//!   packet, vsock…), and `socketpair` other than `AF_UNIX`;
//! - `ioctl` `TIOCSTI` and `TIOCLINUX`, which push input into a terminal.
//!
//! System calls of another ABI on the same machine (32-bit `int 0x80`) kill the process
//! (the filter's architecture check: their numbers mean other calls); x32 calls answer
//! `ENOSYS`. Most of this would fail anyway for want of a capability: the filter is the
//! second wall, and the only one for `ptrace`, keyrings and `io_uring`. Measured cost:
//! see the bash rows of the book's Performance chapter (docs/performance.md).

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};
use std::collections::BTreeMap;

/// System calls refused whatever their arguments.
const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_pidfd_getfd,
    libc::SYS_kcmp,
    libc::SYS_process_madvise,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_open_by_handle_at,
    libc::SYS_acct,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_syslog,
    libc::SYS_quotactl,
    libc::SYS_vhangup,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_iopl,
    #[cfg(target_arch = "x86_64")]
    libc::SYS_ioperm,
];

/// `personality` values allowed: `PER_LINUX`, `PER_LINUX32`, `UNAME26` with either, and
/// the query `0xffffffff`.
const PERSONALITIES: &[u64] = &[0x0, 0x8, 0x20000, 0x20008, 0xffff_ffff];

/// Socket families allowed.
const SOCKET_FAMILIES: &[u64] = &[
    libc::AF_UNIX as u64,
    libc::AF_INET as u64,
    libc::AF_INET6 as u64,
];

/// `clone` flags that make namespaces.
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    0x80, // CLONE_NEWTIME
];

/// `ioctl` requests refused.
const IOCTLS: &[u64] = &[libc::TIOCSTI, libc::TIOCLINUX];

/// The filter, compiled for this machine.
///
/// # Errors
///
/// When this architecture has no filter (the sandbox then refuses to start).
pub fn program() -> Result<BpfProgram, seccompiler::BackendError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| seccompiler::BackendError::InvalidTargetArch(std::env::consts::ARCH.into()))?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&call| (call, Vec::new())).collect();
    rules.insert(
        libc::SYS_personality,
        vec![none_of(0, SeccompCmpArgLen::Dword, PERSONALITIES)?],
    );
    rules.insert(
        libc::SYS_socket,
        vec![none_of(0, SeccompCmpArgLen::Dword, SOCKET_FAMILIES)?],
    );
    rules.insert(
        libc::SYS_socketpair,
        vec![none_of(
            0,
            SeccompCmpArgLen::Dword,
            &[libc::AF_UNIX as u64],
        )?],
    );
    rules.insert(
        libc::SYS_clone,
        NAMESPACE_FLAGS
            .iter()
            .map(|&flag| {
                SeccompRule::new(vec![SeccompCondition::new(
                    0,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::MaskedEq(flag),
                    flag,
                )?])
            })
            .collect::<Result<_, _>>()?,
    );
    rules.insert(
        libc::SYS_ioctl,
        IOCTLS
            .iter()
            .map(|&request| {
                SeccompRule::new(vec![SeccompCondition::new(
                    1,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    request,
                )?])
            })
            .collect::<Result<_, _>>()?,
    );
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    let program: BpfProgram = filter.try_into()?;
    Ok(with_prelude(program))
}

/// A rule that matches when argument `index` is none of `values`.
fn none_of(
    index: u8,
    len: SeccompCmpArgLen,
    values: &[u64],
) -> Result<SeccompRule, seccompiler::BackendError> {
    let conditions = values
        .iter()
        .map(|&v| SeccompCondition::new(index, len.clone(), SeccompCmpOp::Ne, v))
        .collect::<Result<_, _>>()?;
    SeccompRule::new(conditions)
}

/// `program` with what its rules cannot say put after its architecture check: `clone3`
/// and x32 system calls answer `ENOSYS` (a rule's action is the filter's one `EPERM`).
/// Jumps in a BPF program are relative and only forward, so instructions inserted between
/// two parts leave both intact.
fn with_prelude(mut program: BpfProgram) -> BpfProgram {
    const LOAD: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    const JGE: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
    const JEQ: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const JA: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
    const RET: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let insn = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    // The architecture check is the program's first three instructions (load the
    // architecture, jump over the kill when it matches, kill); `seccomp_data.nr` is at
    // offset 0. A jump's offset counts from the next instruction.
    let prelude = [
        insn(LOAD, 0, 0, 0),
        insn(JGE, 2, 0, X32_SYSCALL_BIT),
        insn(JEQ, 1, 0, libc::SYS_clone3 as u32),
        insn(JA, 0, 0, 1),
        insn(RET, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
    ];
    program.splice(3..3, prelude);
    program
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles_for_this_machine_and_starts_with_the_architecture_check() {
        let program = program().unwrap();
        assert_eq!(program[0].k, 4, "loads the architecture");
        assert_eq!(program[2].k, libc::SECCOMP_RET_KILL_PROCESS);
        assert_eq!(program[7].k, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32);
        assert!(program.len() < 512, "{} instructions", program.len());
    }

    /// The filter in a child process: what it refuses answers EPERM (ENOSYS for
    /// `clone3`), what a shell needs works.
    #[test]
    fn a_filtered_process_is_refused_what_the_filter_lists_and_nothing_else() {
        let program = program().unwrap();
        // SAFETY: the child only makes system calls and exits.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let code = (|| {
                seccompiler::apply_filter(&program).ok()?;
                // Each call's return value and errno, read at once.
                let call = |returned: libc::c_long| {
                    (returned, std::io::Error::last_os_error().raw_os_error())
                };
                // SAFETY: system calls with harmless arguments.
                unsafe {
                    let refused = [
                        (
                            call(libc::syscall(
                                libc::SYS_ptrace,
                                libc::PTRACE_TRACEME,
                                0,
                                0,
                                0,
                            )),
                            libc::EPERM,
                        ),
                        (call(libc::syscall(libc::SYS_keyctl, 0, 0)), libc::EPERM),
                        (
                            call(libc::syscall(libc::SYS_unshare, libc::CLONE_NEWNS)),
                            libc::EPERM,
                        ),
                        (
                            call(libc::syscall(
                                libc::SYS_socket,
                                libc::AF_NETLINK,
                                libc::SOCK_RAW,
                                0,
                            )),
                            libc::EPERM,
                        ),
                        (
                            call(libc::syscall(libc::SYS_personality, 0x0040000)),
                            libc::EPERM,
                        ),
                        (
                            call(libc::syscall(libc::SYS_io_uring_setup, 1, 0)),
                            libc::EPERM,
                        ),
                        (call(libc::syscall(libc::SYS_clone3, 0, 0)), libc::ENOSYS),
                    ];
                    for (i, ((returned, errno), wanted)) in refused.iter().enumerate() {
                        if *returned != -1 || *errno != Some(*wanted) {
                            return Some(10 + i as i32);
                        }
                    }
                    let socket = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
                    if socket < 0 || libc::personality(0xffff_ffff) < 0 {
                        return Some(2);
                    }
                    let mut fds = [0; 2];
                    if libc::pipe(fds.as_mut_ptr()) != 0 || libc::getpid() <= 0 {
                        return Some(3);
                    }
                }
                Some(0)
            })()
            .unwrap_or(1);
            // SAFETY: ends the child without running the parent's destructors.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(libc::WIFEXITED(status), "killed: {status}");
        assert_eq!(libc::WEXITSTATUS(status), 0, "see the codes above");
    }
}
