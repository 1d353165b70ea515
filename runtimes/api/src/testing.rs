//! Fixtures the runtimes' tests share (behind `cfg(test)` or the `testing`
//! feature, never in a release build): recipes that more than one test
//! suite lowers.

use crate::recipe::{BaseRecipe, IdentityPrereq, StoragePrereq, UpdateRecipe};

/// The base recipe of a RHEL 10 x86_64 image as the standard starters
/// declare it: security updates without `kernel*`, the admin user
/// `csisadmin` with one public key, the okta identity type by
/// `opa-groups`, the ebs storage type by `aws-ebs`.
pub fn rhel10_base(admin_public_key: &str) -> BaseRecipe {
    BaseRecipe {
        os_type: "rhel".into(),
        family: "rhel".into(),
        family_version: "10".into(),
        architecture: "x86_64".into(),
        update: UpdateRecipe {
            policy: "security".into(),
            exclude: vec!["kernel*".into()],
            ..Default::default()
        },
        admin_user: "csisadmin".into(),
        admin_public_keys: vec![admin_public_key.into()],
        identity: vec![IdentityPrereq {
            identity_type: "okta".into(),
            builder: "opa-groups".into(),
        }],
        storage: vec![StoragePrereq {
            storage_type: "ebs".into(),
            builder: Some("aws-ebs".into()),
        }],
    }
}
