//! csis-runtime-docker: the `docker` runtime type, talking to a daemon that
//! speaks the Docker Engine API (Docker Engine, Docker Desktop, OrbStack,
//! colima, Podman's API service) through bollard, with the API version
//! negotiated (a 20.10 daemon answers API 1.41).
//!
//! # Construction
//! [`DockerSettings`] is what a runtime is made from: [`DockerSettings::new`]
//! (the local daemon, repository `csis/<name>`, network `bridge`) or
//! [`DockerSettings::from_model`] (a loaded tree's docker runtime entry, its
//! `executables:` entry and its `packer-docker` image builders). Then
//! [`DockerRuntime::new`] / [`docker_runtime`]; nothing touches the daemon
//! until a hook runs. [`DockerSettings::problems`] lists what `validate`
//! refuses offline.
//!
//! # Invariants
//! - The daemon is `host` (unix://, tcp:// with `tls_cert_path`/`tls_verify`,
//!   ssh://user@host; a port in an ssh URL is refused, because bollard hands
//!   ssh the authority without its scheme: declare a `~/.ssh/config` alias) or
//!   `context` (read from `~/.docker/contexts/meta/<sha256 of name>/meta.json`),
//!   never both; neither = `DOCKER_HOST` or the default socket. A daemon that
//!   does not answer gives one line: `docker runtime X: the daemon at ADDR
//!   cannot be reached (cause); what to check`.
//! - A build is its image id (`sha256:...`), tagged `<repository>:<final name
//!   as made>` and `<repository>:<prefix>` (floating), labelled with the
//!   request's tags (+ `csis.name`, `csis.blanked`), `CMD ["sleep","infinity"]`,
//!   no entrypoint.
//! - A vendor image resolves to its digest reference (`<repo>@sha256:...`),
//!   or, for a local image with no repo digest (made with `docker import`), to
//!   its image id (fact `identifier` says so). Pins must be one of those two.
//! - The bake container `csis-bake-<runtime>-<series>` is removed on success,
//!   failure and cancellation; scripts go to `/run/csis` (a tmpfs, never
//!   committed) through exec stdin.
//! - Facts stamped after a bake are movable tags `<repository>:<short
//!   id>--<key>--<value>` (escaped reversibly, [`names::movable_tag`]); none is
//!   made for a value the label already carries.
//! - `dispose_image` is refused while any container (running or not) was
//!   created from the build; a build with child images is untagged, the
//!   daemon keeps its layers until its last child goes, and
//!   `dispose_image_outcome` says so (and, for that last child, that the
//!   parents kept for it went with it).
//! - A bake's disk size becomes `--storage-opt size=<n>G` on the bake
//!   container where the daemon's storage driver applies it (found by a
//!   probe container, once per size); where it cannot, the bake log says so
//!   and `check_online` warns when `docker info` already tells.
//! - The inventory reports every container and every volume with its labels
//!   (`csis_config` as `config`).
//! - Every tool a bake starts (ansible-playbook, packer) gets
//!   [`DockerSettings::tool_environment`] (`DOCKER_HOST`... or `DOCKER_CONTEXT`).
//!
//! # Tools
//! ansible steps need `ansible-playbook` with the `community.docker` collection
//! (Debian's `ansible` package has it; PyPI `ansible` too; PyPI `ansible-core`
//! alone does not) and the `docker` CLI. `packer-docker` builders need packer
//! (Debian's 1.6.6 works: csis builds a copy of the root without
//! `required_plugins`, which packer < 1.7 does not know).
//!
//! # Modules
//! - [`names`]: tags, repositories, label keys, movable and release tags.
//! - [`query`]: the image query keys (`name`, `version`, `publisher`,
//!   `architecture`, `native.image`) to an image reference.
//! - [`version`]: the `docker --version` checker (floor `>=24`).
//! - [`connect`]: endpoints (host, context store) and clients.
//! - [`script`]: the settle step and `ensure:` as idempotent POSIX sh.
//! - [`labels`]: the labels beside the request's tags (names spelled in
//!   `csis_schema::tags`), the bake marks read in both spellings, the
//!   lineage labels a bake blanks.
//! - `daemon`: what the daemon's answers mean, forced removal, the bake
//!   container's guard.
//! - [`packer`]: the `packer-docker` root, rendered from plain inputs (no
//!   daemon).
//! - [`runtime`]: [`DockerRuntime`], its client and the trait impl (one line
//!   per hook), the hooks' work in one module per idea: errors, containers,
//!   exec and staging, images and tags, disk sizes, resolve, the native
//!   bake, packer bakes, online checks, dispose, instances.
//!
//! `labels` and `daemon` lie below both `packer` and `runtime`; `runtime`
//! calls `packer`, never the other way.

pub mod connect;
mod daemon;
pub mod labels;
pub mod names;
pub mod packer;
pub mod query;
pub mod runtime;
pub mod script;
pub mod settings;
pub mod version;

pub use labels::{BLANKED_LABEL, NAME_LABEL};
pub use runtime::{docker_runtime, volume_name, DockerRuntime, ExecOutput};
pub use settings::{DockerSettings, MachineType, TlsSettings};
pub use version::{
    check_docker_cli, check_docker_version, parse_docker_version, DOCKER_VERSION_FLOOR,
};
