//! Integration tests: the real host against the real guest components.

mod agents;
mod audit;
mod chain;
mod check;
mod concurrency;
mod config;
mod hostile;
mod instances;
mod offload;
mod plans;
mod read_file;
mod sandbox;
mod session_tables;
mod sessions;
mod trace;
mod versions;
