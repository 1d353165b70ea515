//! `AwsSettings`: the plain description of one `type: aws` runtime entry that
//! this crate is built from. It mirrors the seed's `AwsCloudBuilderModel`
//! (credentials, networking and every field the runtime reads); the strict
//! loader in `csis-rules` owns validation of the YAML, this is only the data.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// `credentials:` of an aws runtime (`AwsCredentials`). Unset fields never
/// reach the SDK; all unset lets the SDK's default chain run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AwsCredentialSettings {
    pub profile_name: Option<String>,
    pub aws_access_key_id: Option<String>,
    pub aws_secret_access_key: Option<String>,
    pub aws_session_token: Option<String>,
}

/// One `networking.subnets[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubnetSettings {
    pub name: String,
    pub subnet_id: String,
    #[serde(default)]
    pub is_default: bool,
    #[serde(default)]
    pub public: bool,
    pub cidr: Option<String>,
    pub availability_zone: Option<String>,
}

/// One `networking.availability_zones[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AvailabilityZoneSettings {
    pub name: String,
    #[serde(default)]
    pub is_default: bool,
}

/// `networking:` (`AwsCloudNetworkingModel`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkSettings {
    /// Label; the network id when empty or `default`.
    pub name: Option<String>,
    /// The VPC id, or `default` for the account's default VPC.
    pub network: String,
    pub subnets: Vec<SubnetSettings>,
    #[serde(default)]
    pub availability_zones: Vec<AvailabilityZoneSettings>,
    #[serde(default)]
    pub addl_security_groups: Vec<String>,
    #[serde(default)]
    pub ssh_ingress_security_group_ids: Vec<String>,
}

impl Default for NetworkSettings {
    fn default() -> Self {
        NetworkSettings {
            name: None,
            network: "default".into(),
            subnets: Vec::new(),
            availability_zones: Vec::new(),
            addl_security_groups: Vec::new(),
            ssh_ingress_security_group_ids: Vec::new(),
        }
    }
}

impl NetworkSettings {
    /// The first subnet with `is_default: true`.
    pub fn default_subnet(&self) -> Option<&SubnetSettings> {
        self.subnets.iter().find(|s| s.is_default)
    }
    /// The declared default availability zone, when one is.
    pub fn default_availability_zone(&self) -> Option<&str> {
        self.availability_zones
            .iter()
            .find(|z| z.is_default)
            .map(|z| z.name.as_str())
    }
}

/// One `type: aws` runtime entry, as this crate needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AwsSettings {
    pub name: String,
    pub region: String,
    pub account_id: Option<String>,
    #[serde(default)]
    pub credentials: AwsCredentialSettings,
    pub networking: Option<NetworkSettings>,
    /// `tags:` of the runtime (merged into image tags by the caller).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    #[serde(default)]
    pub default_owners: Vec<String>,
    /// `ssm` (any case, surrounding whitespace ignored) or unset.
    pub session_mechanism: Option<String>,
    pub iam_instance_profile: Option<String>,
    pub session_instance_profile: Option<String>,
    pub ena_support: Option<bool>,
    pub sriov_support: Option<bool>,
    pub default_machine_type: String,
    /// `ssh_username` of the runtime (`default` = unset).
    pub ssh_username: Option<String>,
    pub default_config_username: Option<String>,
    /// An explicit endpoint (tests; moto). When unset, `AWS_ENDPOINT_URL`
    /// from the environment is honoured.
    #[serde(default)]
    pub endpoint_url: Option<String>,
    /// An endpoint for SSM alone (tests: the SSM double beside moto's EC2).
    #[serde(default)]
    pub ssm_endpoint_url: Option<String>,
    /// The `packer` executable bakes run (`executables:`); `packer` on PATH when unset.
    #[serde(default)]
    pub packer_binary: Option<String>,
    /// Extra environment for the packer process (the runtime's environment).
    #[serde(default)]
    pub packer_env: BTreeMap<String, String>,
    /// The tree's config id: which instances and volumes are this tree's
    /// fleet (`query_instances`, `query_storages`).
    #[serde(default)]
    pub config: Option<String>,
}

impl AwsSettings {
    /// A minimal entry (tests, examples): region and machine type.
    pub fn new(name: &str, region: &str, default_machine_type: &str) -> Self {
        AwsSettings {
            name: name.into(),
            region: region.into(),
            account_id: None,
            credentials: AwsCredentialSettings::default(),
            networking: None,
            tags: BTreeMap::new(),
            default_owners: Vec::new(),
            session_mechanism: None,
            iam_instance_profile: None,
            session_instance_profile: None,
            ena_support: None,
            sriov_support: None,
            default_machine_type: default_machine_type.into(),
            ssh_username: None,
            default_config_username: None,
            endpoint_url: None,
            ssm_endpoint_url: None,
            packer_binary: None,
            packer_env: BTreeMap::new(),
            config: None,
        }
    }
}
