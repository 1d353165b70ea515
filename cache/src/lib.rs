//! csis-cache
