//! Uploaded APKs: streamed to disk under a size limit while their SHA-256
//! is computed, read by the manifest parser (`faultline-apk`), and kept by
//! content: `<data>/apks/<sha256>.apk`, one row each. Uploading the same
//! bytes again answers the APK already kept.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::capabilities::adb::{ApkFile, ApkFiles};
use crate::store::{ApkRow, Store, StoreError, now_ms};

/// Default largest APK accepted (`--max-apk-mb`).
pub const DEFAULT_MAX_APK_BYTES: u64 = 256 << 20;

#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("the APK is larger than the {limit} bytes this host accepts")]
    TooLarge { limit: u64 },
    /// The parser refused it; the code is the parser's.
    #[error("{1}")]
    Unreadable(&'static str, String),
    #[error("the APK declares no launchable activity (an activity or alias with MAIN and LAUNCHER), so it cannot be started")]
    NoLaunchableActivity,
    #[error("the upload broke off: {0}")]
    Broken(String),
    #[error("the APK could not be stored: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub struct ApkStore {
    dir: PathBuf,
    store: Store,
    max_bytes: u64,
}

/// An upload being written: removed unless it is kept.
struct Incoming {
    path: PathBuf,
    file: tokio::fs::File,
    hasher: Sha256,
    size: u64,
}

impl Drop for Incoming {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl ApkStore {
    /// Opens the APK directory, removing what an upload cut short by a crash left.
    pub fn open(dir: PathBuf, store: Store, max_bytes: u64) -> std::io::Result<ApkStore> {
        std::fs::create_dir_all(&dir)?;
        for entry in std::fs::read_dir(&dir)?.flatten() {
            if entry.file_name().to_string_lossy().ends_with(".partial") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        Ok(ApkStore { dir, store, max_bytes })
    }

    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Receives an APK from a stream of chunks; returns its record and
    /// whether it is new. Nothing is kept unless it is a readable APK.
    pub async fn receive<E: std::fmt::Display>(
        &self,
        chunks: impl futures_util::Stream<Item = Result<Bytes, E>>,
        uploaded_by: &str,
    ) -> Result<(ApkRow, bool), UploadError> {
        use futures_util::StreamExt;
        let mut chunks = std::pin::pin!(chunks);
        let path = self.dir.join(format!(".incoming-{}.partial", uuid::Uuid::new_v4()));
        let file = tokio::fs::File::create(&path).await?;
        let mut incoming = Incoming { path, file, hasher: Sha256::new(), size: 0 };
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk.map_err(|e| UploadError::Broken(e.to_string()))?;
            incoming.size += chunk.len() as u64;
            if incoming.size > self.max_bytes {
                return Err(UploadError::TooLarge { limit: self.max_bytes });
            }
            incoming.hasher.update(&chunk);
            incoming.file.write_all(&chunk).await?;
        }
        incoming.file.flush().await?;
        let parsed = {
            let path = incoming.path.clone();
            tokio::task::spawn_blocking(move || faultline_apk::inspect_file(&path))
                .await
                .map_err(|e| UploadError::Broken(format!("reading the manifest failed inside the host: {e}")))?
        };
        let info = parsed.map_err(|e| UploadError::Unreadable(e.code(), e.to_string()))?;
        let activity = info.activity.clone().ok_or(UploadError::NoLaunchableActivity)?;
        let sha256 = hex::encode(incoming.hasher.clone().finalize());
        let kept = self.dir.join(format!("{sha256}.apk"));
        if !kept.exists() {
            tokio::fs::rename(&incoming.path, &kept).await?;
        }
        let row = ApkRow {
            id: format!("apk-{}", &sha256[..16]),
            sha256,
            package: info.package,
            activity,
            version_code: info.version_code.map(|v| v as i64),
            version_name: info.version_name,
            min_sdk: info.min_sdk.map(i64::from),
            target_sdk: info.target_sdk.map(i64::from),
            label: info.label,
            size: incoming.size as i64,
            path: kept.to_string_lossy().into_owned(),
            uploaded_by: uploaded_by.into(),
            uploaded_at: now_ms(),
        };
        Ok(self.store.insert_apk(&row).await?)
    }

    pub async fn get(&self, id: &str) -> Result<Option<ApkRow>, StoreError> {
        self.store.apk(id).await
    }

    pub async fn list(&self) -> Result<Vec<ApkRow>, StoreError> {
        self.store.apks().await
    }

    /// Forgets an APK and removes its file; false if there was none.
    pub async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        let Some(row) = self.store.apk(id).await? else { return Ok(false) };
        let deleted = self.store.delete_apk(id).await?;
        if deleted && Path::new(&row.path).starts_with(&self.dir) {
            let _ = tokio::fs::remove_file(&row.path).await;
        }
        Ok(deleted)
    }
}

/// The adb capability installs uploads by id.
pub struct StoredApks(pub Arc<ApkStore>);

#[async_trait]
impl ApkFiles for StoredApks {
    async fn apk(&self, id: &str) -> Option<ApkFile> {
        let row = self.0.get(id).await.ok().flatten()?;
        Some(ApkFile { path: PathBuf::from(row.path), package: row.package })
    }
}
