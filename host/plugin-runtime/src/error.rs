use crate::model::FaultError;

/// Why a component could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Not a component, or not one of this contract.
    #[error("not a fault component: {0}")]
    Invalid(String),
    /// It imports something the operator did not grant.
    #[error("plugin imports `{import}`, which is not granted to it (granted: {granted})")]
    NotGranted { import: String, granted: String },
    /// Its `describe` failed or returned nonsense.
    #[error("plugin description is unusable: {0}")]
    Describe(String),
    /// The compiled-code cache could not be used.
    #[error("component cache: {0}")]
    Cache(String),
}

/// Why a call into a plugin failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The driver returned an error of its own: the call ran and said no.
    #[error("{0}")]
    Fault(FaultError),
    /// The call ran past its deadline and was interrupted.
    #[error("plugin call `{call}` exceeded its deadline of {ms} ms")]
    Deadline { call: &'static str, ms: u128 },
    /// The guest tried to grow its memory past the cap.
    #[error("plugin call `{call}` exceeded the memory cap of {bytes} bytes")]
    Memory { call: &'static str, bytes: usize },
    /// The guest trapped (a panic, an unreachable, a bad access).
    #[error("plugin call `{call}` trapped: {detail}")]
    Trap { call: &'static str, detail: String },
    /// An earlier trap left this instance unusable.
    #[error("plugin instance is unusable after an earlier failure")]
    Poisoned,
}

impl CallError {
    /// A short stable word for records and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            CallError::Fault(_) => "fault_error",
            CallError::Deadline { .. } => "deadline",
            CallError::Memory { .. } => "memory_cap",
            CallError::Trap { .. } => "trap",
            CallError::Poisoned => "poisoned",
        }
    }
}
