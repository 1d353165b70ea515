//! SDK errors as `RuntimeError`s (a service's answer refuses, a transport
//! failure is unavailability), the AMI "not found" codes, and the run
//! cache's encoding of an error.

use csis_runtime::RuntimeError;

use crate::client::{cause_at, Service};

pub(crate) fn err_to_cache(e: RuntimeError) -> (u8, String) {
    match e {
        RuntimeError::Unavailable(m) => (0, m),
        RuntimeError::Refused(m) => (1, m),
        other => (2, other.to_string()),
    }
}
pub(crate) fn cache_to_err(k: u8, m: String) -> RuntimeError {
    match k {
        0 => RuntimeError::Unavailable(m),
        1 => RuntimeError::Refused(m),
        _ => RuntimeError::Failed(m),
    }
}

/// An SDK error of an EC2 call as a `RuntimeError`: a service's answer
/// refuses, a transport failure (naming the endpoint) is unavailability.
pub(crate) fn sdk_err_at<E, R>(
    prefix: &str,
    e: &aws_sdk_ec2::error::SdkError<E, R>,
    endpoint: &str,
) -> RuntimeError
where
    E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    let msg = format!("{prefix}{}", cause_at(e, endpoint));
    match e {
        aws_sdk_ec2::error::SdkError::ServiceError(_) => RuntimeError::Refused(msg),
        _ => RuntimeError::Unavailable(msg),
    }
}

impl crate::AwsRuntime {
    /// [`sdk_err_at`] this runtime's EC2 endpoint.
    pub(crate) fn sdk_err<E, R>(
        &self,
        prefix: &str,
        e: &aws_sdk_ec2::error::SdkError<E, R>,
    ) -> RuntimeError
    where
        E: aws_sdk_ec2::error::ProvideErrorMetadata + std::error::Error + 'static,
        R: std::fmt::Debug,
    {
        sdk_err_at(prefix, e, &self.clients().endpoint(Service::Ec2))
    }
}

pub(crate) fn is_not_found_ami(code: Option<&str>) -> bool {
    matches!(
        code,
        Some("InvalidAMIID.NotFound")
            | Some("InvalidAMIID.Malformed")
            | Some("InvalidImageID.NotFound")
            | Some("InvalidImageID.Malformed")
            | Some("InvalidAMIID.Unavailable")
    )
}
