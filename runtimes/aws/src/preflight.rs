//! Preflight: the endpoint it asks, who the credentials are (STS
//! `GetCallerIdentity`), and the declared `account_id` beside the account
//! they act in.

use csis_runtime::{PreflightLine, Result};

use crate::client::{self, Service};
use crate::AwsRuntime;

impl AwsRuntime {
    /// `preflight`'s identity: (account, ARN) from STS GetCallerIdentity.
    pub async fn caller_identity(&self) -> std::result::Result<(String, String), String> {
        client::check_profile(&self.settings)?;
        let sts = self.clients.sts().await;
        let out = sts
            .get_caller_identity()
            .send()
            .await
            .map_err(|e| self.clients.cause(Service::Sts, &e))?;
        Ok((out.account.unwrap_or_default(), out.arn.unwrap_or_default()))
    }

    /// The endpoint preflight talks to (STS), then who the credentials are.
    pub(crate) async fn preflight_lines(&self) -> Result<Vec<PreflightLine>> {
        let name = &self.settings.name;
        let endpoint = PreflightLine {
            ok: true,
            what: format!("aws {name}: endpoint"),
            detail: self.clients.endpoint(Service::Sts),
        };
        let mut lines = vec![endpoint];
        lines.extend(match self.caller_identity().await {
            Ok((account, arn)) => {
                let mut lines = vec![
                    PreflightLine {
                        ok: true,
                        what: format!("aws {name}: account"),
                        detail: account.clone(),
                    },
                    PreflightLine {
                        ok: true,
                        what: format!("aws {name}: identity"),
                        detail: arn,
                    },
                ];
                if let Some(decl) = self.settings.account_id.as_deref() {
                    if decl != account {
                        lines.push(PreflightLine {
                            ok: true,
                            what: format!("aws {name}: account_id"),
                            detail: format!(
                                "declared {decl}, the credentials act in {account} (account_id is not a check)"
                            ),
                        });
                    }
                }
                lines
            }
            Err(e) => vec![PreflightLine {
                ok: false,
                what: format!("aws {name}: identity"),
                detail: format!("AWS Error: {e}"),
            }],
        });
        Ok(lines)
    }
}
