//! The offline checks of an aws runtime entry, as `validate` and every
//! load run them: a region, a session mechanism csis speaks, and a
//! networking declaration a bake can use (one default subnet, at most five
//! additional security groups).

use csis_schema::model::{AwsFields, RuntimeCommon};
use csis_schema::Problem;

/// The most security groups a launch takes besides its own.
const ADDL_SECURITY_GROUPS_MAX: usize = 5;

/// Why a session mechanism other than `ssm` is refused.
pub(crate) fn unknown_session_mechanism(runtime: &str, mechanism: &str) -> String {
    format!("AWS runtime {runtime}: unknown session mechanism '{mechanism}' (supported: ssm)")
}

/// What a runtime without `networking:` lacks.
pub(crate) fn no_networking(runtime: &str) -> String {
    format!("No networking configuration provided for AWS cloud builder {runtime}")
}

/// The offline problems of an aws runtime entry (paths relative to the entry).
pub fn entry_problems(common: &RuntimeCommon, aws: &AwsFields) -> Vec<Problem> {
    let mut out = Vec::new();
    if aws.region.trim().is_empty() {
        out.push(Problem::error("region", "region may not be empty"));
    }
    if let Some(m) = &common.session_mechanism {
        if !m.trim().eq_ignore_ascii_case("ssm") {
            out.push(
                Problem::error(
                    "session_mechanism",
                    unknown_session_mechanism(&common.name, m),
                )
                .with_hint("use `ssm`, or leave session_mechanism unset"),
            );
        }
    }
    let Some(n) = &aws.networking else {
        out.push(Problem::warning(
            "",
            format!(
                "{} (image generation needs the VPC and subnet)",
                no_networking(&common.name)
            ),
        ));
        return out;
    };
    if n.name.as_deref().is_some_and(|s| s.trim().is_empty()) {
        out.push(Problem::error(
            "networking.name",
            format!(
                "Networking configuration name cannot be empty for {}.",
                common.name
            ),
        ));
    }
    if n.network.trim().is_empty() {
        out.push(
            Problem::error(
                "networking.network",
                "network may not be empty (`default` = the account's default VPC)",
            )
            .pointing_at("networking"),
        );
    }
    let defaults = n.subnets.iter().filter(|s| s.is_default).count();
    if n.subnets.is_empty() {
        out.push(
            Problem::error("networking.subnets", "networking needs at least one subnet")
                .with_hint("declare `subnets: [{name, subnet_id, is_default: true}]`"),
        );
    } else if defaults != 1 {
        out.push(
            Problem::error(
                "networking.subnets",
                format!("exactly one subnet must have `is_default: true` (found {defaults})"),
            )
            .with_hint("mark the subnet bakes and instances use with is_default: true"),
        );
    }
    if n.addl_security_groups.len() > ADDL_SECURITY_GROUPS_MAX {
        out.push(Problem::error(
            "networking.addl_security_groups",
            format!(
                "Total number of security groups specified in networking configuration for AWS cloud builder {} is {}, more than the limit of {ADDL_SECURITY_GROUPS_MAX}",
                common.name,
                n.addl_security_groups.len()
            ),
        ));
    }
    out
}
