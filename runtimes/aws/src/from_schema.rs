//! The conversion from the strict config model of `csis-schema`
//! (`RuntimeCommon` + `model::AwsFields`, i.e. the seed's
//! `AwsCloudBuilderModel`) into [`AwsSettings`].

use csis_schema::model::{AwsFields, RuntimeCommon};

use crate::settings::{
    AvailabilityZoneSettings, AwsCredentialSettings, AwsSettings, NetworkSettings, SubnetSettings,
};

fn unset_default(s: &str) -> Option<String> {
    let t = s.trim();
    if t.is_empty() || t.eq_ignore_ascii_case("default") {
        None
    } else {
        Some(t.to_string())
    }
}

impl AwsSettings {
    /// Build the settings of one `type: aws` entry from the loaded model.
    /// `packer_binary` is the resolved `executables:` binary of the packer
    /// image builder, when the caller knows it.
    pub fn from_model(common: &RuntimeCommon, aws: &AwsFields) -> AwsSettings {
        let networking = aws.networking.as_ref().map(|n| {
            let mut zones: Vec<AvailabilityZoneSettings> = n
                .availability_zones
                .iter()
                .map(|z| AvailabilityZoneSettings {
                    name: z.name.clone(),
                    is_default: z.is_default,
                })
                .collect();
            // `default_availability_zone` (a csis shorthand) is the declared default zone
            if let Some(dz) = n
                .default_availability_zone
                .as_deref()
                .filter(|z| !z.is_empty())
            {
                for z in zones.iter_mut() {
                    z.is_default = z.name == dz;
                }
                if !zones.iter().any(|z| z.name == dz) {
                    zones.insert(
                        0,
                        AvailabilityZoneSettings {
                            name: dz.to_string(),
                            is_default: true,
                        },
                    );
                }
            }
            NetworkSettings {
                name: n.name.clone(),
                network: n.network.clone(),
                subnets: n
                    .subnets
                    .iter()
                    .map(|s| SubnetSettings {
                        name: s.name.clone().unwrap_or_else(|| s.subnet_id.clone()),
                        subnet_id: s.subnet_id.clone(),
                        is_default: s.is_default,
                        public: s.public,
                        cidr: s.cidr.clone(),
                        availability_zone: s.availability_zone.clone(),
                    })
                    .collect(),
                availability_zones: zones,
                addl_security_groups: n.addl_security_groups.clone(),
                ssh_ingress_security_group_ids: n.ssh_ingress_security_group_ids.clone(),
            }
        });
        let mut s = AwsSettings::new(&common.name, &aws.region, &common.default_machine_type);
        s.account_id = aws.account_id.clone();
        s.credentials = AwsCredentialSettings {
            profile_name: aws.credentials.profile_name.clone(),
            aws_access_key_id: aws.credentials.aws_access_key_id.clone(),
            aws_secret_access_key: aws.credentials.aws_secret_access_key.clone(),
            aws_session_token: aws.credentials.aws_session_token.clone(),
        };
        s.networking = networking;
        s.tags = common
            .tags
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        s.default_owners = common.default_owners.clone().unwrap_or_default();
        s.session_mechanism = common.session_mechanism.clone();
        s.iam_instance_profile = aws.iam_instance_profile.clone();
        s.session_instance_profile = aws.session_instance_profile.clone();
        s.ena_support = aws.ena_support;
        s.sriov_support = aws.sriov_support;
        s.ssh_username = unset_default(&common.ssh_username);
        s.default_config_username = common.default_config_username.clone();
        s
    }

    /// From a loaded tree's runtime entry; `None` when it is not `type: aws`.
    pub fn from_tree(rt: &csis_schema::RuntimeEntry) -> Option<AwsSettings> {
        let aws = rt.aws()?;
        let mut s = AwsSettings::from_model(&rt.common, aws);
        s.name = rt.name.clone();
        Some(s)
    }
}
