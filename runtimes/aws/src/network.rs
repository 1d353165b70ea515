//! Network discovery at load (`update_networking()` /
//! `get_vpc_map_and_default_vpc_id()`): the four describe calls, once per
//! runtime per run, and the load-time verdicts of the seed with its texts.

use std::collections::BTreeMap;

use csis_runtime::OnlineFinding;

use crate::settings::AwsSettings;

/// One subnet as the account lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredSubnet {
    pub subnet_id: String,
    pub cidr: Option<String>,
    pub is_public: bool,
    pub availability_zone: Option<String>,
    pub tags: BTreeMap<String, String>,
}

/// What the four describe calls found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    /// `{vpc_id: subnets}`.
    pub vpc_map: BTreeMap<String, Vec<DiscoveredSubnet>>,
    pub default_vpc_id: Option<String>,
    /// `{group_id: description}`.
    pub all_security_groups: BTreeMap<String, String>,
}

/// A route table reduced to what the public-subnet rule reads.
#[derive(Debug, Clone, Default)]
pub struct RouteTableFacts {
    pub vpc_id: String,
    pub main: bool,
    pub subnet_ids: Vec<String>,
    /// (destination, gateway id) of every route.
    pub routes: Vec<(String, String)>,
}

impl RouteTableFacts {
    /// A `0.0.0.0/0` or `::/0` route to an `igw-` or `vgw-` gateway.
    pub fn is_public(&self) -> bool {
        self.routes.iter().any(|(dest, gw)| {
            (dest == "0.0.0.0/0" || dest == "::/0")
                && (gw.starts_with("igw-") || gw.starts_with("vgw-"))
        })
    }
}

/// Is a subnet public: its own association, else its VPC's main table.
pub fn subnet_is_public(subnet_id: &str, vpc_id: &str, tables: &[RouteTableFacts]) -> bool {
    if let Some(own) = tables
        .iter()
        .find(|t| t.subnet_ids.iter().any(|s| s == subnet_id))
    {
        return own.is_public();
    }
    tables
        .iter()
        .find(|t| t.main && t.vpc_id == vpc_id)
        .map(|t| t.is_public())
        .unwrap_or(false)
}

/// Run the four describe calls (each paged) and build the discovery; an
/// error that is not the service's answer names `endpoint`.
pub async fn discover(ec2: &aws_sdk_ec2::Client, endpoint: &str) -> Result<Discovery, String> {
    use crate::client::cause_at;
    let mut d = Discovery::default();

    // the four lists asked at once (each a round trip; none needs another)
    let vpcs = async {
        let mut out = Vec::new();
        let mut pages = ec2.describe_vpcs().into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| cause_at(&e, endpoint))?;
            out.extend(page.vpcs.unwrap_or_default());
        }
        Ok::<_, String>(out)
    };
    let subnets = async {
        let mut out = Vec::new();
        let mut pages = ec2.describe_subnets().into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| cause_at(&e, endpoint))?;
            out.extend(page.subnets.unwrap_or_default());
        }
        Ok::<_, String>(out)
    };
    let tables = async {
        let mut out = Vec::new();
        let mut pages = ec2.describe_route_tables().into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| cause_at(&e, endpoint))?;
            out.extend(page.route_tables.unwrap_or_default());
        }
        Ok::<_, String>(out)
    };
    let groups = async {
        let mut out = Vec::new();
        let mut pages = ec2.describe_security_groups().into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| cause_at(&e, endpoint))?;
            out.extend(page.security_groups.unwrap_or_default());
        }
        Ok::<_, String>(out)
    };
    let (vpcs, subnets, tables, groups) = tokio::try_join!(vpcs, subnets, tables, groups)?;

    for v in &vpcs {
        let Some(id) = v.vpc_id.clone() else { continue };
        if v.is_default == Some(true) && d.default_vpc_id.is_none() {
            d.default_vpc_id = Some(id.clone());
        }
        d.vpc_map.entry(id).or_default();
    }
    let tables: Vec<RouteTableFacts> = tables
        .into_iter()
        .map(|t| {
            let assoc = t.associations.clone().unwrap_or_default();
            RouteTableFacts {
                vpc_id: t.vpc_id.clone().unwrap_or_default(),
                main: assoc.iter().any(|a| a.main == Some(true)),
                subnet_ids: assoc.iter().filter_map(|a| a.subnet_id.clone()).collect(),
                routes: t
                    .routes
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|r| {
                        let dest = r.destination_cidr_block.or(r.destination_ipv6_cidr_block)?;
                        Some((dest, r.gateway_id.unwrap_or_default()))
                    })
                    .collect(),
            }
        })
        .collect();
    for s in subnets {
        let (Some(sid), Some(vpc)) = (s.subnet_id.clone(), s.vpc_id.clone()) else {
            continue;
        };
        let is_public = subnet_is_public(&sid, &vpc, &tables);
        d.vpc_map.entry(vpc).or_default().push(DiscoveredSubnet {
            subnet_id: sid,
            cidr: s.cidr_block.clone(),
            is_public,
            availability_zone: s.availability_zone.clone(),
            tags: s
                .tags
                .unwrap_or_default()
                .into_iter()
                .filter_map(|t| Some((t.key?, t.value.unwrap_or_default())))
                .collect(),
        });
    }
    for g in groups {
        if let Some(id) = g.group_id {
            d.all_security_groups
                .insert(id, g.description.unwrap_or_default());
        }
    }
    Ok(d)
}

/// The VPC a declaration resolves to (`default` -> the account's default VPC).
pub fn effective_vpc(settings: &AwsSettings, d: &Discovery) -> Option<String> {
    let net = settings.networking.as_ref()?;
    let n = net.network.trim();
    if n.is_empty() || n == "default" {
        d.default_vpc_id.clone()
    } else {
        Some(n.to_string())
    }
}

fn err(path: &str, message: String) -> OnlineFinding {
    OnlineFinding {
        path: path.into(),
        message,
        error: true,
    }
}

/// Every load-time verdict of the seed, with its text, against a discovery.
pub fn verdicts(settings: &AwsSettings, d: &Discovery) -> Vec<OnlineFinding> {
    let name = &settings.name;
    let mut out = Vec::new();
    let Some(net) = settings.networking.as_ref() else {
        out.push(OnlineFinding {
            path: "networking".into(),
            message: crate::offline::no_networking(name),
            error: false,
        });
        return out;
    };
    if let Some(n) = net.name.as_deref() {
        if !n.is_empty() && n.trim().is_empty() {
            out.push(err(
                "networking.name",
                format!("Networking configuration name cannot be empty for {name}."),
            ));
        }
    }
    let declared = net.network.trim();
    let vpc = if declared.is_empty() || declared == "default" {
        match &d.default_vpc_id {
            Some(v) => v.clone(),
            None => {
                out.push(err(
                    "networking.network",
                    format!(
                        "No VPC ID specified in networking configuration for AWS cloud builder {name}, and no default VPC found in AWS account. Declare `networking.network` with a VPC id of the account."
                    ),
                ));
                String::new()
            }
        }
    } else {
        declared.to_string()
    };
    if !vpc.is_empty() {
        match d.vpc_map.get(&vpc) {
            None => out.push(err(
                "networking.network",
                format!(
                    "VPC ID {vpc} specified in networking configuration for AWS cloud builder {name} not found in AWS account."
                ),
            )),
            Some(listed) if !listed.is_empty() => {
                for (i, s) in net.subnets.iter().enumerate() {
                    if !listed.iter().any(|l| l.subnet_id == s.subnet_id) {
                        let label = if s.name.is_empty() { &s.subnet_id } else { &s.name };
                        out.push(err(
                            &format!("networking.subnets[{i}].subnet_id"),
                            format!(
                                "Subnet {} ({label}) in networking configuration for AWS cloud builder {name} is not in VPC {vpc}.",
                                s.subnet_id
                            ),
                        ));
                    }
                }
            }
            Some(_) => {} // a VPC listed without subnets makes no claim
        }
    }
    for (i, sg) in net.addl_security_groups.iter().enumerate() {
        if !d.all_security_groups.contains_key(sg) {
            out.push(err(
                &format!("networking.addl_security_groups[{i}]"),
                format!(
                    "Security group ID {sg} specified in networking configuration for AWS cloud builder {name} not found in AWS account."
                ),
            ));
        }
    }
    let n = net.addl_security_groups.len();
    if n > 5 {
        out.push(err(
            "networking.addl_security_groups",
            format!(
                "Total number of security groups specified in networking configuration for AWS cloud builder {name} is {n}, which may exceed limits for certain instance types. At most 5 are allowed in `addl_security_groups`."
            ),
        ));
    }
    out
}

/// The finding for a discovery that could not be made: on the runtime,
/// naming the endpoint, when the endpoint did not answer (nothing says the
/// credentials are wrong then); on `credentials` otherwise.
pub fn aws_error(settings: &AwsSettings, cause: &str) -> OnlineFinding {
    let c = cause.to_ascii_lowercase();
    let unreachable = [
        "dispatch failure",
        "connection refused",
        "connect error",
        "tcp connect",
        "timed out",
        "timeout",
        "dns error",
        "io error",
        "error trying to connect",
    ]
    .iter()
    .any(|k| c.contains(k));
    if unreachable {
        let endpoint = crate::client::endpoint_of(settings, crate::client::Service::Ec2);
        // (the cause names the endpoint already: once is enough)
        let cause = cause
            .strip_prefix(&format!("{endpoint}: "))
            .unwrap_or(cause);
        let what = if cause.starts_with("no answer from ") {
            cause.to_string()
        } else {
            format!("the endpoint {endpoint} cannot be reached ({cause})")
        };
        return err(
            "",
            format!(
                "AWS runtime {}: {what}; check the network, `region` and AWS_ENDPOINT_URL",
                settings.name
            ),
        );
    }
    err("credentials", format!("AWS Error: {cause}"))
}
