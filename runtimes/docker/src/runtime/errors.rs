//! Errors from the daemon: which answers mean "not there" or "in use", an
//! error with its causes on one line, and the runtime's wording of an
//! unreachable daemon or a refused call.

use csis_runtime::RuntimeError;

use super::DockerRuntime;
use crate::connect;
pub(super) use crate::daemon::{api_message, cause_chain, is_conflict, is_not_found};

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
