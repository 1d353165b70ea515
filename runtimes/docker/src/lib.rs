//! csis-runtime-docker
