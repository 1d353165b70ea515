//! The secrets operations of `encrypt`, `decrypt`, `reencrypt`, `mask` and
//! `public-safe`: markers found, sealed and opened, recipients, the
//! public-safe scan. They live in `csis_rules::secrets` (the loader opens
//! the same markers); this is where the binary reaches them.

pub use csis_rules::crypt::is_marker;
pub use csis_rules::secrets::*;
