//! ferry's end-to-end test crate: the machinery that runs real Kubernetes
//! control planes with ferry's hub and agents against them (`harness`), and
//! the vocabulary the tests in `tests/e2e/` speak (`helpers`).
#![forbid(unsafe_code)]

pub mod harness;
pub mod helpers;
