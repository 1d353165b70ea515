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

/// The value of [`CONFIG`] for the tree whose `id` is `id`, as the original
/// writes it on AMIs, volumes, instances and labels: the id lowercased
/// (`my-team-images-REPLACE-ME` -> `my-team-images-replace-me`; its 0.1.1
/// emission changes no other character).
pub fn config_value(id: &str) -> String {
    id.to_lowercase()
}

/// Is a [`CONFIG`] value this tree's (or the same tree's as another
/// value)? The original's form ([`config_value`]) and csis's earlier one
/// (the id as written) both are: what either baked for this tree is this
/// tree's. Two ids that differ only in case are one tree's, as they are to
/// the original (it tags both alike).
pub fn is_config_of(value: &str, id: &str) -> bool {
    value == id || config_value(value) == config_value(id)
}
/// Marks a bake machine (value: the runtime's name): an EC2 builder
/// instance, a docker bake container.
pub const BAKE: &str = "csis_bake";
/// A bake machine's owner (`host:pid`).
pub const BAKE_OWNER: &str = "csis_bake_owner";
/// [`BAKE`] as docker runtimes labelled bake containers before they wrote
/// the original's `csis_` form: still read, so that a container a csis of
/// then left behind is found and removed.
pub const DOCKER_BAKE_BEFORE: &str = "csis.bake";
/// [`BAKE_OWNER`] as docker runtimes once labelled it ([`DOCKER_BAKE_BEFORE`]).
pub const DOCKER_BAKE_OWNER_BEFORE: &str = "csis.bake_owner";
/// The marks of a bake machine, as written now and as once written.
pub const BAKE_MARKS: [&str; 2] = [BAKE, DOCKER_BAKE_BEFORE];
/// The owner marks of a bake machine, as written now and as once written.
pub const BAKE_OWNER_MARKS: [&str; 2] = [BAKE_OWNER, DOCKER_BAKE_OWNER_BEFORE];

/// Docker image labels outside the [`PREFIX`] (which `query_images` reads
/// back as the image's tags): the final name as made.
pub const DOCKER_NAME: &str = "csis.name";
/// The repository a committed docker build belongs to (found again
/// untagged, when a kill came between `docker commit` and its tag).
pub const DOCKER_REPOSITORY: &str = "csis.repository";
/// The parent's lineage labels a docker bake blanked (labels are inherited
/// and cannot be removed), comma-separated.
pub const DOCKER_BLANKED: &str = "csis.blanked";
/// Marks a test machine (value: the runtime's name).
pub const TEST_MACHINE: &str = "csis_test_machine";
/// A test machine's owner (`host:pid`).
pub const TEST_MACHINE_OWNER: &str = "csis_owner";
/// Marks a bake machine `csis build --keep-failed` started (value: the
/// run id): kept, not removed, when its bake fails, so that it can be
/// inspected; the next build's clean-up of stale bakes leaves a kept one
/// alone until `csis empty --remove` takes it.
pub const KEPT_FAILED: &str = "csis_kept_failed";

/// The lineage an image carries, as `state query` compares it with the
/// records.
pub const LINEAGE: [&str; 4] = [SERIES, PARENT, RUN, FINGERPRINT];

/// Marks a fleet instance (value: the instance's declared name); the
/// machine also carries [`CONFIG`] (in [`config_value`]'s form), [`BUILD`]
/// and [`GENERATION`].
pub const INSTANCE: &str = "csis_instance";
/// The build (image id, AMI id) a fleet instance was launched from.
pub const BUILD: &str = "csis_build";
/// The generation of an instance (the `NNN` of its canonical hostname, as
/// a decimal number) or of a storage (one more after each regeneration).
pub const GENERATION: &str = "csis_generation";
/// Marks a fleet storage (value: the storage's declared name); it also
/// carries [`CONFIG`] and [`GENERATION`].
pub const STORAGE: &str = "csis_storage";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_value_is_the_originals_form_and_both_forms_are_ours() {
        // the original 0.1.1 tags the standard starter's AMIs so
        // (../shared/reference/cs-image-system-0.1.1-emission)
        assert_eq!(
            config_value("my-team-images-REPLACE-ME"),
            "my-team-images-replace-me"
        );
        assert!(is_config_of(
            "my-team-images-replace-me",
            "my-team-images-REPLACE-ME"
        ));
        assert!(is_config_of(
            "my-team-images-REPLACE-ME",
            "my-team-images-REPLACE-ME"
        ));
        assert!(!is_config_of(
            "my-team-images-REPLACE",
            "my-team-images-REPLACE-ME"
        ));
        // either side may be in either form
        assert!(is_config_of("Ops-AWS", "ops-aws"));
        assert!(!is_config_of("ops-aws-2", "Ops-AWS"));
    }
}
