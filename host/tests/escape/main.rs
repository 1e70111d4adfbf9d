//! The escape suite: each attack a tenant's command (or a planted file) can try on the
//! sandbox and on the host code around it, through the real binary, as the user the tests
//! run as and, when that is root, as an ordinary user too (see [`harness`]). One module per
//! property; each opens with the property it proves.

mod cmdline;
#[path = "../common/mod.rs"]
mod common;
mod filesystem_reach;
mod harness;
mod init;
mod keyrings;
mod leftovers;
mod many_files;
mod memory;
mod network;
mod persistent_links;
mod proc_sys;
mod processes;
mod quota_walk;
mod sparse_files;
mod syscalls;
