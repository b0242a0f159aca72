//! Plugin results (upstream `framework.Status` and its codes).

use std::fmt;

/// Upstream's status codes, in its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    Success,
    /// Internal error: the pod is retried with backoff.
    Error,
    /// The pod does not fit now; preemption might help.
    Unschedulable,
    /// The pod does not fit and preemption cannot help on this node.
    UnschedulableAndUnresolvable,
    /// Permit: the pod waits before binding.
    Wait,
    /// Skip this plugin at the following extension point.
    Skip,
}

/// A plugin's verdict with its human-readable reasons.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Status {
    code: Code,
    reasons: Vec<String>,
    plugin: String,
}

impl Status {
    pub fn success() -> Self {
        Self::new(Code::Success, Vec::new())
    }

    pub fn new(code: Code, reasons: Vec<String>) -> Self {
        Self {
            code,
            reasons,
            plugin: String::new(),
        }
    }

    pub fn unschedulable(reason: impl Into<String>) -> Self {
        Self::new(Code::Unschedulable, vec![reason.into()])
    }

    pub fn unresolvable(reason: impl Into<String>) -> Self {
        Self::new(Code::UnschedulableAndUnresolvable, vec![reason.into()])
    }

    pub fn error(reason: impl Into<String>) -> Self {
        Self::new(Code::Error, vec![reason.into()])
    }

    /// Records which plugin produced this status (upstream's `WithPlugin`).
    pub fn with_plugin(mut self, plugin: &str) -> Self {
        self.plugin = plugin.to_string();
        self
    }

    pub fn code(&self) -> Code {
        self.code
    }

    pub fn reasons(&self) -> &[String] {
        &self.reasons
    }

    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    pub fn is_success(&self) -> bool {
        self.code == Code::Success
    }

    pub fn is_rejected(&self) -> bool {
        matches!(
            self.code,
            Code::Unschedulable | Code::UnschedulableAndUnresolvable
        )
    }

    /// The reasons joined as upstream's `Status.Message()`.
    pub fn message(&self) -> String {
        self.reasons.join(", ")
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message())
    }
}
