//! csis-runtime-docker: the `docker` runtime type, talking to a daemon that
//! speaks the Docker Engine API (Docker Engine, Docker Desktop, OrbStack,
//! colima, Podman's API service) through bollard.
//!
//! - [`DockerSettings`] is what a runtime is constructed from; [`DockerRuntime::new`]
//!   builds it, [`Runtime`](csis_runtime::Runtime) is every hook.
//! - [`names`]: tags, repositories, label keys, movable and release tags.
//! - [`query`]: the image query keys (`name`, `version`, `publisher`,
//!   `architecture`, `native.image`) to an image reference.
//! - [`version`]: the `docker --version` checker (floor `>=24`).
//!
//! Builds are image ids (`sha256:...`). A vendor image resolves to its digest
//! reference (`<repository>@sha256:...`), or, for an image that exists only
//! locally (made with `docker import`, no registry), to its image id.

pub mod connect;
pub mod names;
pub mod packer;
pub mod query;
pub mod runtime;
pub mod script;
pub mod settings;
pub mod version;

pub use runtime::{docker_runtime, DockerRuntime, ExecOutput, NAME_LABEL};
pub use settings::{DockerSettings, MachineType, TlsSettings};
pub use version::{
    check_docker_cli, check_docker_version, parse_docker_version, DOCKER_VERSION_FLOOR,
};
