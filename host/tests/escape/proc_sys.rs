//! Property: a command cannot write the host's kernel state through `/proc` — sysctls
//! (`kernel.core_pattern` would run a program of its choosing as hookhost's user, outside
//! every namespace), the SysRq trigger, IRQ affinities — even when hookhost runs as root,
//! whose user the sandbox's user is outside; and `/proc` entries that show the host's
//! kernel memory, keys or addresses read as empty.
//!
//! The write tried changes a harmless value (`kernel.printk_ratelimit_burst`) and is
//! undone when it landed; `core_pattern` is written with the value it has.

use crate::harness::{self, Host};

const BURST: &str = "/proc/sys/kernel/printk_ratelimit_burst";

#[test]
fn no_command_writes_a_sysctl_or_reads_kernel_memory() {
    let before = std::fs::read_to_string(BURST).unwrap();
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap();
    let changed: u32 = before.trim().parse::<u32>().unwrap() + 1;
    for who in harness::users() {
        let host = Host::new(who, "");
        let session = host.session("alpha");
        let (said, _) = host.bash(
            "alpha",
            &session,
            &format!(
                "exec 2>&1; echo {changed} > {BURST}; echo '{}' > /proc/sys/kernel/core_pattern; \
                 for f in /proc/sys/kernel/core_pattern /proc/sysrq-trigger /proc/irq/default_smp_affinity; do \
                 [ -e $f ] && [ -w $f ] && echo writable $f; done; \
                 head -c 64 /proc/kcore /proc/kallsyms /proc/timer_list 2>/dev/null | wc -c",
                pattern.trim()
            ),
        );
        let after = std::fs::read_to_string(BURST).unwrap();
        if after != before {
            std::fs::write(BURST, &before).unwrap();
        }
        assert_eq!(
            after, before,
            "{who:?}: a command changed a host sysctl: {said}"
        );
        assert!(!said.contains("writable"), "{who:?}: {said}");
        assert!(
            said.contains("Read-only file system") || said.contains("Permission denied"),
            "{who:?}: {said}"
        );
        assert!(
            said.trim_end().ends_with("\n0") || said.trim() == "0",
            "{who:?}: read kernel state: {said}"
        );
    }
}
