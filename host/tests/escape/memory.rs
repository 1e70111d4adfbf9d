//! Property: a sandbox's memory is bounded as a whole where hookhost can make it a memory
//! cgroup — its processes, its `/tmp` and `/dev/shm`, shared memory and `memfd`s together
//! — and `hookhost config check` says how memory is bounded, so an operator knows when it
//! is per process only.

use crate::harness::{self, Host};

/// 512 MiB in a memfd (no file system, no data segment), touched page by page.
const MEMFD: &str = r#"python3 - <<'MEM'
import mmap, os
fd = os.memfd_create("big")
os.ftruncate(fd, 512 << 20)
m = mmap.mmap(fd, 512 << 20)
for i in range(0, 512 << 20, 4096):
    m[i] = 1
print("FILL" + "ED")
MEM"#;

#[test]
fn a_memfd_beyond_the_sandboxs_memory_is_refused_where_a_cgroup_bounds_it() {
    for who in harness::users() {
        let host = Host::new(
            who,
            "\n[tenants.alpha.bash]\nlimits = { memory_bytes = 134217728 }\n",
        );
        let check = host.run(&["config", "check"]);
        let said = harness::text(&check.stdout);
        let bounded = said.contains("a memory cgroup per sandbox");
        assert!(
            bounded || said.contains("per process only"),
            "{who:?}: config check does not say how memory is bounded: {said}"
        );
        let session = host.session("alpha");
        let (filled, _) = host.bash("alpha", &session, MEMFD);
        if bounded {
            assert!(
                !filled.contains("FILLED"),
                "{who:?}: 512 MiB under a 128 MiB bound: {filled}"
            );
            // The sandbox is usable again, or replaced: the next command runs.
            assert_eq!(
                host.bash("alpha", &session, "echo next").0,
                "next\n",
                "{who:?}"
            );
        }
    }
}
