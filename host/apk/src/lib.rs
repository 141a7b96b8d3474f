//! Reads what Faultline needs from an APK: its package, the activity
//! Android's launcher would start, and its version and SDK levels, from
//! the compiled (binary XML) `AndroidManifest.xml` inside the zip.
//!
//! The input is untrusted (an upload): every size and offset is checked
//! before use, the manifest is read under a hard cap whatever the zip says
//! of it, and nothing panics or allocates without bound.
//!
//! - `archive`: finding and reading the manifest entry of the zip;
//! - `axml`: the binary XML format (chunks, string pool, resource map,
//!   elements and typed attribute values);
//! - `manifest`: what Android makes of the elements (package, launcher
//!   entry, versions).

mod archive;
mod axml;
mod manifest;

use std::path::Path;

pub use archive::MAX_MANIFEST_BYTES;

/// What an APK's manifest says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApkInfo {
    pub package: String,
    /// The launchable activity, fully qualified; none when the app has none.
    pub activity: Option<String>,
    pub version_code: Option<u64>,
    pub version_name: Option<String>,
    pub min_sdk: Option<u32>,
    pub target_sdk: Option<u32>,
    /// The application's label when it is plain text (not a resource reference).
    pub label: Option<String>,
}

/// Why an APK could not be read. Each has a stable code (`code`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ApkError {
    #[error("not an APK: {0}")]
    NotAnApk(String),
    #[error("the APK has no AndroidManifest.xml")]
    MissingManifest,
    #[error("AndroidManifest.xml is not compiled binary XML (plain-text XML, or not XML at all): APKs carry it compiled")]
    ManifestNotBinary,
    #[error("AndroidManifest.xml is malformed: {0}")]
    InvalidManifest(String),
    #[error("AndroidManifest.xml inflates past {limit} bytes; no real manifest is that large")]
    ManifestTooLarge { limit: u64 },
    #[error("the manifest names no valid package: {0}")]
    MissingPackage(String),
}

impl ApkError {
    /// The stable machine code of this error.
    pub fn code(&self) -> &'static str {
        match self {
            ApkError::NotAnApk(_) => "not_an_apk",
            ApkError::MissingManifest => "missing_manifest",
            ApkError::ManifestNotBinary => "manifest_not_binary",
            ApkError::InvalidManifest(_) => "invalid_manifest",
            ApkError::ManifestTooLarge { .. } => "manifest_too_large",
            ApkError::MissingPackage(_) => "missing_package",
        }
    }
}

/// Reads an APK held in memory.
pub fn inspect_bytes(bytes: &[u8]) -> Result<ApkInfo, ApkError> {
    parse_manifest(&archive::manifest(std::io::Cursor::new(bytes))?)
}

/// Reads an APK on disk, without loading it whole.
pub fn inspect_file(path: &Path) -> Result<ApkInfo, ApkError> {
    let file = std::fs::File::open(path).map_err(|e| ApkError::NotAnApk(format!("{}: {e}", path.display())))?;
    parse_manifest(&archive::manifest(std::io::BufReader::new(file))?)
}

/// Reads a compiled AndroidManifest.xml.
pub fn parse_manifest(axml: &[u8]) -> Result<ApkInfo, ApkError> {
    manifest::read(&axml::parse(axml)?)
}
