//! The exit codes of `csis`, by name. Every command exits with one of these.

/// Done; the answer is yes (`empty`: the runtime is empty).
pub const SUCCESS: u8 = 0;
/// Failed, refused, or the answer is no (drift, leftovers, a check failed).
pub const FAILURE: u8 = 1;
/// Could not answer: bad usage, a runtime that cannot be asked, nothing to check.
pub const CANNOT_ANSWER: u8 = 2;
/// `csis plan --detailed-exitcode`: the plan has something due (as
/// Terraform's `plan -detailed-exitcode`: 0 nothing due, 1 an error, 2 due).
pub const DUE: u8 = 2;
/// Another csis holds the tree lock and `--no-wait` was given (EX_TEMPFAIL).
pub const LOCKED: u8 = 75;
/// Stopped by Ctrl-C.
pub const INTERRUPTED: u8 = 130;
