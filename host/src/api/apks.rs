//! APK uploads: `POST /upload/apk` (a multipart part named `file` or
//! `apk`) and `POST /android/upload` (the part `apk`), both answering the
//! APK record; `GET /apks`, `GET /apks/{id}`, `DELETE /apks/{id}`. An
//! upload streams to disk under the host's size limit (413 past it, never
//! buffered whole), its manifest is read, and it is kept by content.

use std::time::{Duration, Instant};

use axum::extract::multipart::{Field, MultipartRejection};
use axum::extract::{Multipart, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::{Extension, Json};
use serde::Serialize;
use serde_json::json;
use utoipa::ToSchema;

use super::audit::AuditNote;
use super::extract::PathParam;
use super::{ApiError, AppState};
use crate::auth::{Caller, Role};
use crate::platforms::android::apks::{ApkStore, UploadError};
use crate::store::ApkRow;

/// Past the limit, how much more is read and dropped, and for how long,
/// before answering 413 (a client still sending would miss the answer).
const DRAIN_BYTES: usize = 64 << 20;
const DRAIN_TIME: Duration = Duration::from_secs(2);
/// What a multipart body may add to the file it carries (boundaries, headers).
const MULTIPART_SLACK: u64 = 64 << 10;

/// An uploaded APK.
#[derive(Serialize, ToSchema)]
pub struct ApkRecord {
    /// The APK's identifier: `apk` in an Android start.
    pub id: String,
    /// The same identifier.
    pub apk: String,
    /// Where the host keeps the file; it ends in `.apk`.
    pub path: String,
    /// The app's package, from its manifest.
    pub package: String,
    /// The launchable activity, fully qualified, as Android's launcher resolves it.
    pub activity: String,
    /// SHA-256 of the file: the same bytes uploaded again are the same APK.
    pub sha256: String,
    pub size: i64,
    pub version_code: Option<i64>,
    pub version_name: Option<String>,
    pub min_sdk: Option<i64>,
    pub target_sdk: Option<i64>,
    pub label: Option<String>,
    pub uploaded_by: String,
    pub uploaded_at: i64,
}

impl From<ApkRow> for ApkRecord {
    fn from(r: ApkRow) -> Self {
        ApkRecord {
            apk: r.id.clone(),
            id: r.id,
            path: r.path,
            package: r.package,
            activity: r.activity,
            sha256: r.sha256,
            size: r.size,
            version_code: r.version_code,
            version_name: r.version_name,
            min_sdk: r.min_sdk,
            target_sdk: r.target_sdk,
            label: r.label,
            uploaded_by: r.uploaded_by,
            uploaded_at: r.uploaded_at,
        }
    }
}

/// The multipart body of an upload.
#[derive(ToSchema, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code, reason = "documents the body only")]
pub struct ApkUpload {
    /// The APK file (on `/upload/apk` the part may also be named `apk`).
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
}

/// The multipart body of `/android/upload`.
#[derive(ToSchema, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code, reason = "documents the body only")]
pub struct AndroidUpload {
    /// The APK file.
    #[schema(value_type = String, format = Binary)]
    apk: Vec<u8>,
}

impl From<UploadError> for ApiError {
    fn from(e: UploadError) -> Self {
        let detail = e.to_string();
        match e {
            UploadError::TooLarge { limit } => ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", detail).with(json!({ "max_bytes": limit })),
            UploadError::Unreadable(code, _) => ApiError::unprocessable(code, detail),
            UploadError::NoLaunchableActivity => ApiError::unprocessable("no_launchable_activity", detail),
            UploadError::Broken(_) => ApiError::bad_request("malformed_multipart", detail),
            UploadError::Io(_) => ApiError::internal(detail),
            UploadError::Store(e) => e.into(),
        }
    }
}

fn store(state: &AppState) -> Result<&ApkStore, ApiError> {
    state.apks.as_deref().ok_or_else(|| ApiError::unavailable("platform_unavailable", "this host keeps no APKs"))
}

const UPLOAD_REFUSALS: &str = "`missing_file`: no part named as the route says; `not_an_apk`: not a zip, or a corrupt one; \
    `missing_manifest`; `manifest_not_binary`: AndroidManifest.xml is not compiled binary XML; `invalid_manifest`; \
    `manifest_too_large` (decompression bombs included); `missing_package`; `no_launchable_activity`: no activity or \
    alias with MAIN and LAUNCHER, so nothing could start the app";

/// Uploads an APK (engineer): one binary part named `file` or `apk`.
#[utoipa::path(post, path = "/upload/apk",
    request_body(content = ApkUpload, content_type = "multipart/form-data"),
    responses((status = 201, description = "Stored", body = ApkRecord), (status = 200, description = "The same bytes were uploaded before: that APK", body = ApkRecord),
        (status = 400, description = "`malformed_multipart`"), (status = 403, description = "`forbidden`: uploads need the engineer role"),
        (status = 413, description = "`payload_too_large`: larger than the host's `--max-apk-mb`"),
        (status = 415, description = "`unsupported_media_type`: not multipart/form-data"), (status = 422, description = UPLOAD_REFUSALS)))]
pub async fn upload_apk(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<(StatusCode, Extension<AuditNote>, Json<ApkRecord>), ApiError> {
    receive(&state, &caller, &headers, multipart, &["file", "apk"]).await
}

/// Uploads an APK (engineer): the binary part `apk` (`file` is taken too).
#[utoipa::path(post, path = "/android/upload",
    request_body(content = AndroidUpload, content_type = "multipart/form-data"),
    responses((status = 201, description = "Stored", body = ApkRecord), (status = 200, description = "The same bytes were uploaded before: that APK", body = ApkRecord),
        (status = 400, description = "`malformed_multipart`"), (status = 403, description = "`forbidden`: uploads need the engineer role"),
        (status = 413, description = "`payload_too_large`: larger than the host's `--max-apk-mb`"),
        (status = 415, description = "`unsupported_media_type`: not multipart/form-data"), (status = 422, description = UPLOAD_REFUSALS)))]
pub async fn android_upload(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<(StatusCode, Extension<AuditNote>, Json<ApkRecord>), ApiError> {
    receive(&state, &caller, &headers, multipart, &["apk", "file"]).await
}

async fn receive(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
    parts: &[&str],
) -> Result<(StatusCode, Extension<AuditNote>, Json<ApkRecord>), ApiError> {
    caller.require(Role::Engineer)?;
    let apks = store(state)?;
    // A declared length past the limit is refused before a byte is read.
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > apks.max_bytes() + MULTIPART_SLACK) {
        return Err(UploadError::TooLarge { limit: apks.max_bytes() }.into());
    }
    let mut multipart = multipart.map_err(|e| {
        ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", format!("send the APK as multipart/form-data: {e}"))
    })?;
    let malformed = |e: axum::extract::multipart::MultipartError| ApiError::bad_request("malformed_multipart", e.body_text());
    let mut received = None;
    while let Some(mut field) = multipart.next_field().await.map_err(malformed)? {
        if !field.name().is_some_and(|n| parts.contains(&n)) {
            continue;
        }
        if received.is_some() {
            return Err(ApiError::unprocessable("missing_file", format!("send one APK: the body has more than one part named {}", parts.join(" or "))));
        }
        match apks.receive(&mut field, &caller.name).await {
            Err(UploadError::TooLarge { limit }) => {
                let until = Instant::now() + DRAIN_TIME;
                drain(field, until).await;
                let _ = tokio::time::timeout(until.saturating_duration_since(Instant::now()), multipart.next_field()).await;
                return Err(UploadError::TooLarge { limit }.into());
            }
            outcome => received = Some(outcome?),
        }
    }
    let (row, new) = received.ok_or_else(|| ApiError::unprocessable("missing_file", format!("the body has no part named {}", parts.join(" or "))))?;
    let note = AuditNote { subject: Some(row.id.clone()), detail: Some(json!({ "package": row.package, "sha256": row.sha256, "size": row.size, "new": new })) };
    let status = if new { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Extension(note), Json(row.into())))
}

/// Reads and drops what is left of a refused file, until `until`.
async fn drain(mut field: Field<'_>, until: Instant) {
    let mut read = 0;
    while read < DRAIN_BYTES && Instant::now() < until {
        match tokio::time::timeout(until.saturating_duration_since(Instant::now()), field.chunk()).await {
            Ok(Ok(Some(chunk))) => read += chunk.len(),
            _ => break,
        }
    }
}

/// Every uploaded APK, newest first (viewer).
#[utoipa::path(get, path = "/apks", responses((status = 200, body = [ApkRecord])))]
pub async fn list_apks(State(state): State<AppState>, caller: Caller) -> Result<Json<Vec<ApkRecord>>, ApiError> {
    caller.require(Role::Viewer)?;
    Ok(Json(store(&state)?.list().await?.into_iter().map(ApkRecord::from).collect()))
}

/// One uploaded APK (viewer).
#[utoipa::path(get, path = "/apks/{id}", params(("id" = String, Path, description = "The APK's id")),
    responses((status = 200, body = ApkRecord), (status = 404, description = "`apk_not_found`")))]
pub async fn get_apk(State(state): State<AppState>, caller: Caller, PathParam(id): PathParam<String>) -> Result<Json<ApkRecord>, ApiError> {
    caller.require(Role::Viewer)?;
    let row = store(&state)?.get(&id).await?.ok_or_else(|| not_found(&id))?;
    Ok(Json(row.into()))
}

/// Deletes an uploaded APK and its file (engineer); refused while a running
/// experiment uses it.
#[utoipa::path(delete, path = "/apks/{id}", params(("id" = String, Path, description = "The APK's id")),
    responses((status = 204, description = "Deleted"), (status = 403, description = "`forbidden`: deleting needs the engineer role"),
        (status = 404, description = "`apk_not_found`"), (status = 409, description = "`apk_in_use`: a running experiment uses it")))]
pub async fn delete_apk(State(state): State<AppState>, caller: Caller, PathParam(id): PathParam<String>) -> Result<StatusCode, ApiError> {
    caller.require(Role::Engineer)?;
    let apks = store(&state)?;
    apks.get(&id).await?.ok_or_else(|| not_found(&id))?;
    for running in state.store.experiments_in_state("running").await? {
        let plan = super::experiments::plan_of(&running)?;
        if crate::platforms::android::uses_apk(&plan.options, &id) {
            return Err(ApiError::conflict("apk_in_use", format!("experiment {} runs APK {id}", running.id)).with(json!({ "experiment": running.id })));
        }
    }
    match apks.delete(&id).await? {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(not_found(&id)),
    }
}

fn not_found(id: &str) -> ApiError {
    ApiError::not_found("apk_not_found", format!("no uploaded APK `{id}`"))
}
