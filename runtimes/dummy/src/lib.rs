//! csis-runtime-dummy
