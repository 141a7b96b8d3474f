//! The zip side of an APK: the manifest entry, read under a hard cap.

use std::io::{Read, Seek};

use crate::ApkError;

/// Largest manifest read. Real ones are a few KiB to a few hundred; past
/// this it is a decompression bomb, whatever the zip header claims.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// Entries a zip may have before it is not worth reading; real APKs of
/// large apps have tens of thousands.
const MAX_ENTRIES: usize = 500_000;

const MANIFEST: &str = "AndroidManifest.xml";

/// The manifest's bytes.
pub fn manifest<R: Read + Seek>(reader: R) -> Result<Vec<u8>, ApkError> {
    let mut zip = zip::ZipArchive::new(reader).map_err(|e| ApkError::NotAnApk(e.to_string()))?;
    if zip.len() > MAX_ENTRIES {
        return Err(ApkError::NotAnApk(format!("{} entries, more than any APK holds", zip.len())));
    }
    let mut entry = match zip.by_name(MANIFEST) {
        Ok(entry) => entry,
        Err(zip::result::ZipError::FileNotFound) => return Err(ApkError::MissingManifest),
        Err(e) => return Err(ApkError::NotAnApk(e.to_string())),
    };
    if entry.is_dir() {
        return Err(ApkError::MissingManifest);
    }
    // The header's size can lie: read one byte past the cap to know.
    let mut bytes = Vec::with_capacity(entry.size().min(MAX_MANIFEST_BYTES) as usize);
    (&mut entry).take(MAX_MANIFEST_BYTES + 1).read_to_end(&mut bytes).map_err(|e| ApkError::NotAnApk(format!("reading {MANIFEST}: {e}")))?;
    if bytes.len() as u64 > MAX_MANIFEST_BYTES {
        return Err(ApkError::ManifestTooLarge { limit: MAX_MANIFEST_BYTES });
    }
    Ok(bytes)
}
