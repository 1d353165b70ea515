//! Shell text for the docker runtime's own commands (release commands, the
//! docker CLI prefix): the one quoting function and packer's
//! `execute_command` rendering live in [`csis_runtime::recipe`], with every
//! bake step.

pub use csis_runtime::recipe::{execute_command, sq};
