//! Unit tests of the harness modules (compare, expectations).
#![allow(dead_code)]

#[path = "compare.rs"]
mod compare;
#[path = "expectations.rs"]
mod expectations;
