//! The `aws` runtime entry's own fields: region, credentials, networking.

use serde::{Deserialize, Serialize};

use crate::model::values::{default_str, is_default_sentinel};
use crate::model::JsonMap;

/// `credentials:` of an aws runtime (boto3 `Session` keywords).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AwsCredentials {
    #[serde(default)]
    pub profile_name: Option<String>,
    #[serde(default)]
    pub aws_access_key_id: Option<String>,
    #[serde(default)]
    pub aws_secret_access_key: Option<String>,
    #[serde(default)]
    pub aws_session_token: Option<String>,
}

/// A `networking.subnets[]` entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subnet {
    #[serde(default)]
    pub name: Option<String>,
    pub subnet_id: String,
    #[serde(default)]
    pub is_default: bool,
    #[serde(default)]
    pub public: bool,
    #[serde(default)]
    pub cidr: Option<String>,
    #[serde(default)]
    pub availability_zone: Option<String>,
    #[serde(default)]
    pub config: JsonMap,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AvailabilityZone {
    pub name: String,
    #[serde(default)]
    pub is_default: bool,
}

/// `networking:` of an aws runtime (`AwsCloudNetworkingModel`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AwsNetworking {
    /// A label; defaults to the network id.
    #[serde(default)]
    pub name: Option<String>,
    /// The VPC id; `default` = the account's default VPC.
    #[serde(default = "default_str")]
    pub network: String,
    /// At least one; exactly one `is_default`.
    #[serde(default)]
    pub subnets: Vec<Subnet>,
    #[serde(default)]
    pub availability_zones: Vec<AvailabilityZone>,
    #[serde(default)]
    pub default_availability_zone: Option<String>,
    /// Existing groups every instance also wears; at most five.
    #[serde(default)]
    pub addl_security_groups: Vec<String>,
    /// Port 22 opened only to these groups.
    #[serde(default)]
    pub ssh_ingress_security_group_ids: Vec<String>,
}

impl AwsNetworking {
    /// The subnet bakes and instances use (the first `is_default`).
    pub fn default_subnet(&self) -> Option<&Subnet> {
        self.subnets.iter().find(|s| s.is_default)
    }
    /// The zone: `default_availability_zone`, the default zone, or the default subnet's.
    pub fn zone(&self) -> Option<&str> {
        self.default_availability_zone
            .as_deref()
            .or_else(|| {
                self.availability_zones
                    .iter()
                    .find(|z| z.is_default)
                    .map(|z| z.name.as_str())
            })
            .or_else(|| {
                self.default_subnet()
                    .and_then(|s| s.availability_zone.as_deref())
            })
    }
    /// The label (`name`, else the network id).
    pub fn label(&self) -> &str {
        match self.name.as_deref() {
            Some(n) if !is_default_sentinel(n) => n,
            _ => &self.network,
        }
    }
}

/// The `aws` runtime's own fields (`AwsCloudBuilderModel`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AwsFields {
    /// boto3 `region_name`, the packer `region`.
    pub region: String,
    /// Reported by `runtime describe`; a bare number becomes a string.
    #[serde(default)]
    pub account_id: Option<String>,
    #[serde(default)]
    pub credentials: AwsCredentials,
    /// Written into the amazon-ebs source when declared.
    #[serde(default)]
    pub ena_support: Option<bool>,
    #[serde(default)]
    pub sriov_support: Option<bool>,
    /// Build instances' profile when `session_instance_profile` is unset.
    #[serde(default)]
    pub iam_instance_profile: Option<String>,
    /// The SSM-capable profile for launched and build instances.
    #[serde(default)]
    pub session_instance_profile: Option<String>,
    /// Null loads with a warning (image generation needs it).
    #[serde(default)]
    pub networking: Option<AwsNetworking>,
}
