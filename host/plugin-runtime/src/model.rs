//! Plain Rust forms of the contract's types, with serde, for the host's API
//! and store. Conversions to and from the generated bindings live here only.

use serde::{Deserialize, Serialize};

use crate::bindings::types as wit;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Platform {
    Backend,
    Frontend,
    Android,
}

impl Platform {
    pub const ALL: [Platform; 3] = [Platform::Backend, Platform::Frontend, Platform::Android];

    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Backend => "backend",
            Platform::Frontend => "frontend",
            Platform::Android => "android",
        }
    }

    pub fn parse(s: &str) -> Option<Platform> {
        Platform::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IntensityScope {
    PerTarget,
    ShareOfTargets,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntensitySpec {
    pub unit: String,
    pub min: f64,
    pub max: f64,
    pub default: f64,
    pub step: f64,
    pub scope: IntensityScope,
    /// Lower is harsher (a battery level).
    #[serde(default)]
    pub descending: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParamKind {
    Number,
    Integer,
    Text,
    Flag,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParamSpec {
    pub name: String,
    pub description: String,
    pub kind: ParamKind,
    pub required: bool,
}

/// What a fault driver says about itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultInfo {
    pub name: String,
    pub aliases: Vec<String>,
    pub description: String,
    pub platforms: Vec<Platform>,
    pub intensity: Option<IntensitySpec>,
    pub params: Vec<ParamSpec>,
    pub conflicts_with: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    Flag(bool),
    Integer(i64),
    Number(f64),
    Text(String),
}

/// What the host asks a driver to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub intensity: f64,
    pub params: Vec<(String, ParamValue)>,
    pub ttl_seconds: u32,
}

/// A resolved target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    pub platform: Platform,
    pub id: String,
    pub name: String,
    pub attributes: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum CapabilityError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("denied: {0}")]
    Denied(String),
    #[error("unavailable: {0}")]
    Unavailable(String),
    #[error("timed out: {0}")]
    Timeout(String),
    #[error("failed: {0}")]
    Failed(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
pub enum FaultError {
    #[error("invalid settings: {0}")]
    InvalidSettings(String),
    #[error("target unavailable: {0}")]
    TargetUnavailable(String),
    #[error("capability {0}")]
    Capability(CapabilityError),
    #[error("{0}")]
    Failed(String),
}

impl From<wit::Platform> for Platform {
    fn from(p: wit::Platform) -> Self {
        match p {
            wit::Platform::Backend => Platform::Backend,
            wit::Platform::Frontend => Platform::Frontend,
            wit::Platform::Android => Platform::Android,
        }
    }
}

impl From<Platform> for wit::Platform {
    fn from(p: Platform) -> Self {
        match p {
            Platform::Backend => wit::Platform::Backend,
            Platform::Frontend => wit::Platform::Frontend,
            Platform::Android => wit::Platform::Android,
        }
    }
}

impl From<wit::FaultInfo> for FaultInfo {
    fn from(i: wit::FaultInfo) -> Self {
        FaultInfo {
            name: i.name,
            aliases: i.aliases,
            description: i.description,
            platforms: i.platforms.into_iter().map(Platform::from).collect(),
            intensity: i.intensity.map(|s| IntensitySpec {
                unit: s.unit,
                min: s.min,
                max: s.max,
                default: s.default,
                step: s.step,
                scope: match s.scope {
                    wit::IntensityScope::PerTarget => IntensityScope::PerTarget,
                    wit::IntensityScope::ShareOfTargets => IntensityScope::ShareOfTargets,
                },
                descending: s.descending,
            }),
            params: i
                .params
                .into_iter()
                .map(|p| ParamSpec {
                    name: p.name,
                    description: p.description,
                    kind: match p.kind {
                        wit::ParamKind::Number => ParamKind::Number,
                        wit::ParamKind::Integer => ParamKind::Integer,
                        wit::ParamKind::Text => ParamKind::Text,
                        wit::ParamKind::Flag => ParamKind::Flag,
                    },
                    required: p.required,
                })
                .collect(),
            conflicts_with: i.conflicts_with,
        }
    }
}

impl From<&Settings> for wit::Settings {
    fn from(s: &Settings) -> Self {
        wit::Settings {
            intensity: s.intensity,
            params: s
                .params
                .iter()
                .map(|(name, value)| wit::Param {
                    name: name.clone(),
                    value: match value {
                        ParamValue::Number(n) => wit::ParamValue::Number(*n),
                        ParamValue::Integer(n) => wit::ParamValue::Integer(*n),
                        ParamValue::Text(t) => wit::ParamValue::Text(t.clone()),
                        ParamValue::Flag(b) => wit::ParamValue::Flag(*b),
                    },
                })
                .collect(),
            ttl_seconds: s.ttl_seconds,
        }
    }
}

impl From<&Target> for wit::Target {
    fn from(t: &Target) -> Self {
        wit::Target {
            platform: t.platform.into(),
            id: t.id.clone(),
            name: t.name.clone(),
            attributes: t.attributes.clone(),
        }
    }
}

impl From<wit::CapabilityError> for CapabilityError {
    fn from(e: wit::CapabilityError) -> Self {
        match e {
            wit::CapabilityError::NotFound(s) => CapabilityError::NotFound(s),
            wit::CapabilityError::Denied(s) => CapabilityError::Denied(s),
            wit::CapabilityError::Unavailable(s) => CapabilityError::Unavailable(s),
            wit::CapabilityError::Timeout(s) => CapabilityError::Timeout(s),
            wit::CapabilityError::Failed(s) => CapabilityError::Failed(s),
        }
    }
}

impl From<CapabilityError> for wit::CapabilityError {
    fn from(e: CapabilityError) -> Self {
        match e {
            CapabilityError::NotFound(s) => wit::CapabilityError::NotFound(s),
            CapabilityError::Denied(s) => wit::CapabilityError::Denied(s),
            CapabilityError::Unavailable(s) => wit::CapabilityError::Unavailable(s),
            CapabilityError::Timeout(s) => wit::CapabilityError::Timeout(s),
            CapabilityError::Failed(s) => wit::CapabilityError::Failed(s),
        }
    }
}

impl From<wit::FaultError> for FaultError {
    fn from(e: wit::FaultError) -> Self {
        match e {
            wit::FaultError::InvalidSettings(s) => FaultError::InvalidSettings(s),
            wit::FaultError::TargetUnavailable(s) => FaultError::TargetUnavailable(s),
            wit::FaultError::Capability(c) => FaultError::Capability(c.into()),
            wit::FaultError::Failed(s) => FaultError::Failed(s),
        }
    }
}
