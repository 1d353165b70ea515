//! csis-runtime-aws against moto (EC2, STS, SSM's stub), an SSM double of
//! our own for the polling logic, and a stand-in packer executable.
//!
//! moto: `runtimes/aws/tests/moto.sh` starts it on 127.0.0.1:5000
//! (`CSIS_MOTO_URL` overrides). Without it the moto tests print a loud
//! SKIPPED line, unless `CSIS_REQUIRE_MOTO` is set, when they fail.

#[path = "../common/mod.rs"]
mod common;

mod bake;
mod emission;
mod emitted_files;
mod golden;
mod hooks;
mod leftovers;
mod network;
mod offline;
mod resolve;
mod secrets;
mod sessions;
