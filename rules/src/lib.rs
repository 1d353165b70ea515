//! csis-rules
