//! The names of the tags (EC2) and labels (Docker) csis stamps on what it
//! makes. An image carries its lineage (series, parent, run, fingerprint),
//! its capabilities, its tree's config id and, once released, its release;
//! a bake machine and a test machine carry the marks by which a later run
//! finds and removes a leftover whose owner is gone. Their values are the
//! records' own: `csis state query` and adoption read them back.

/// Prefix of every tag/label name csis stamps.
pub const PREFIX: &str = "csis_";

/// The image's series (an image's or OS builder's name).
pub const SERIES: &str = "csis_series";
/// The parent build's id (`vendor` for a base image's vendor image).
pub const PARENT: &str = "csis_parent";
/// The run id of the build that baked the image.
pub const RUN: &str = "csis_run";
/// The bake's input fingerprint.
pub const FINGERPRINT: &str = "csis_fingerprint";
/// The identity types the image is prepared for, comma-separated.
pub const IDENTITY_TYPES: &str = "csis_identity_types";
/// The storage types the image is prepared for, comma-separated.
pub const STORAGE_TYPES: &str = "csis_storage_types";
/// The release an image is part of.
pub const RELEASE: &str = "csis_release";
/// The tree (its `cfg/_config.yml` `id`) that baked an image or runs a bake
/// machine: every image and bake machine carries it.
pub const CONFIG: &str = "csis_config";
/// Marks a bake machine (value: the runtime's name).
pub const BAKE: &str = "csis_bake";
/// A bake machine's owner (`host:pid`).
pub const BAKE_OWNER: &str = "csis_bake_owner";
/// Marks a test machine (value: the runtime's name).
pub const TEST_MACHINE: &str = "csis_test_machine";
/// A test machine's owner (`host:pid`).
pub const TEST_MACHINE_OWNER: &str = "csis_owner";

/// The lineage an image carries, as `state query` compares it with the
/// records.
pub const LINEAGE: [&str; 4] = [SERIES, PARENT, RUN, FINGERPRINT];
