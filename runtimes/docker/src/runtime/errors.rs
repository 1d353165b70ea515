//! Errors from the daemon: which answers mean "not there" or "in use", an
//! error with its causes on one line, and the runtime's wording of an
//! unreachable daemon or a refused call.

use csis_runtime::RuntimeError;

use super::DockerRuntime;
use crate::connect;

pub(super) fn is_not_found(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

pub(super) fn is_conflict(e: &bollard::errors::Error) -> bool {
    matches!(
        e,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 409,
            ..
        }
    )
}

/// An error with its causes (`client error (Connect): Connection refused (os error 111)`).
pub(super) fn cause_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        cur = c.source();
    }
    out.replace('\n', " ")
}

pub(super) fn api_message(e: &bollard::errors::Error) -> String {
    match e {
        bollard::errors::Error::DockerResponseServerError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

impl DockerRuntime {
    pub(crate) fn unreachable(&self, cause: &str) -> RuntimeError {
        let remedy = self
            .endpoint
            .as_ref()
            .map(connect::remedy)
            .unwrap_or("fix the runtime's host/context");
        RuntimeError::Unavailable(format!(
            "docker runtime {}: the daemon at {} cannot be reached ({cause}); {remedy}",
            self.settings.name,
            self.address()
        ))
    }

    pub(crate) fn map_err(&self, what: &str, e: bollard::errors::Error) -> RuntimeError {
        match &e {
            bollard::errors::Error::DockerResponseServerError { .. } => {
                RuntimeError::Failed(format!(
                    "docker runtime {}: {what}: {}",
                    self.settings.name,
                    api_message(&e)
                ))
            }
            bollard::errors::Error::HyperResponseError { .. }
            | bollard::errors::Error::IOError { .. }
            | bollard::errors::Error::RequestTimeoutError => self.unreachable(&cause_chain(&e)),
            _ => RuntimeError::Failed(format!(
                "docker runtime {}: {what}: {e}",
                self.settings.name
            )),
        }
    }
}
