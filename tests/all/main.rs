//! Integration tests: the real host against the real guest components.

mod chain;
mod offload;
mod read_file;
mod sandbox;
