//! The crate's error type.

/// A failed request to the API server, classified the way client-go's event
/// sink does: a server answer (a `Status`) is final, anything else may pass.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server answered with a failure `Status` (upstream's `StatusError`).
    #[error("API server rejected the request ({code} {reason}): {message}")]
    Status {
        code: u16,
        reason: String,
        message: String,
        /// `details.causes[].reason` of the Status (e.g. `NamespaceTerminating`).
        causes: Vec<String>,
    },
    /// The request could not be built; building it again gives the same result.
    #[error("could not construct the request: {0}")]
    Request(#[source] Box<kube::Error>),
    /// No usable answer: connection, TLS, timeout, or an undecodable body.
    #[error("request to the API server failed: {0}")]
    Transport(#[source] Box<kube::Error>),
}

impl Error {
    /// HTTP 404 from the server.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Status { code: 404, .. })
    }

    /// Whether sending the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Transport(_))
    }
}

impl From<kube::Error> for Error {
    fn from(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(status) => Error::Status {
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
                causes: status
                    .details
                    .as_ref()
                    .map(|d| d.causes.iter().map(|c| c.reason.clone()).collect())
                    .unwrap_or_default(),
            },
            e @ (kube::Error::BuildRequest(_) | kube::Error::HttpError(_)) => {
                Error::Request(Box::new(e))
            }
            e => Error::Transport(Box::new(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_kube_errors() {
        let status = kube::core::Status::failure("events \"x\" not found", "NotFound")
            .with_code(404)
            .boxed();
        let e = Error::from(kube::Error::Api(status));
        assert!(e.is_not_found());
        assert!(!e.is_retryable());

        let e = Error::from(kube::Error::ReadEvents(std::io::Error::other("reset")));
        assert!(!e.is_not_found());
        assert!(e.is_retryable());

        let e = Error::from(kube::Error::LinesCodecMaxLineLengthExceeded);
        assert!(e.is_retryable());
    }
}
