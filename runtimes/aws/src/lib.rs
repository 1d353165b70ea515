//! csis-runtime-aws
