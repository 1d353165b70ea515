//! csis-engine
