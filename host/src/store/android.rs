//! Uploaded APKs, and the reports of Android experiments.

use sqlx::Row;

use super::{Store, StoreResult};

/// An uploaded APK: what its manifest says, and where the host keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApkRow {
    pub id: String,
    pub sha256: String,
    pub package: String,
    /// The launchable activity, fully qualified.
    pub activity: String,
    pub version_code: Option<i64>,
    pub version_name: Option<String>,
    pub min_sdk: Option<i64>,
    pub target_sdk: Option<i64>,
    pub label: Option<String>,
    pub size: i64,
    pub path: String,
    pub uploaded_by: String,
    pub uploaded_at: i64,
}

fn apk_row(r: &sqlx::sqlite::SqliteRow) -> ApkRow {
    ApkRow {
        id: r.get("id"),
        sha256: r.get("sha256"),
        package: r.get("package"),
        activity: r.get("activity"),
        version_code: r.get("version_code"),
        version_name: r.get("version_name"),
        min_sdk: r.get("min_sdk"),
        target_sdk: r.get("target_sdk"),
        label: r.get("label"),
        size: r.get("size"),
        path: r.get("path"),
        uploaded_by: r.get("uploaded_by"),
        uploaded_at: r.get("uploaded_at"),
    }
}

impl Store {
    /// Records an APK unless one with its content is known; returns the
    /// stored row and whether it is new.
    pub async fn insert_apk(&self, apk: &ApkRow) -> StoreResult<(ApkRow, bool)> {
        let inserted = sqlx::query(
            "INSERT INTO apks (id, sha256, package, activity, version_code, version_name, min_sdk, target_sdk, label, size, path, uploaded_by, uploaded_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (sha256) DO NOTHING",
        )
        .bind(&apk.id)
        .bind(&apk.sha256)
        .bind(&apk.package)
        .bind(&apk.activity)
        .bind(apk.version_code)
        .bind(&apk.version_name)
        .bind(apk.min_sdk)
        .bind(apk.target_sdk)
        .bind(&apk.label)
        .bind(apk.size)
        .bind(&apk.path)
        .bind(&apk.uploaded_by)
        .bind(apk.uploaded_at)
        .execute(&self.pool)
        .await?;
        let row = sqlx::query("SELECT * FROM apks WHERE sha256 = $1").bind(&apk.sha256).fetch_one(&self.pool).await?;
        Ok((apk_row(&row), inserted.rows_affected() == 1))
    }

    pub async fn apk(&self, id: &str) -> StoreResult<Option<ApkRow>> {
        let row = sqlx::query("SELECT * FROM apks WHERE id = $1").bind(id).fetch_optional(&self.pool).await?;
        Ok(row.as_ref().map(apk_row))
    }

    /// Every APK, newest first.
    pub async fn apks(&self) -> StoreResult<Vec<ApkRow>> {
        let rows = sqlx::query("SELECT * FROM apks ORDER BY uploaded_at DESC, id").fetch_all(&self.pool).await?;
        Ok(rows.iter().map(apk_row).collect())
    }

    /// Forgets an APK; false if there was none.
    pub async fn delete_apk(&self, id: &str) -> StoreResult<bool> {
        Ok(sqlx::query("DELETE FROM apks WHERE id = $1").bind(id).execute(&self.pool).await?.rows_affected() == 1)
    }

    /// Saves what an Android experiment's device reported (JSON).
    pub async fn save_android_report(&self, experiment_id: &str, report: &str, at: i64) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO android_reports (experiment_id, report, updated_at) VALUES ($1, $2, $3)
             ON CONFLICT (experiment_id) DO UPDATE SET report = excluded.report, updated_at = excluded.updated_at",
        )
        .bind(experiment_id)
        .bind(report)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn android_report(&self, experiment_id: &str) -> StoreResult<Option<String>> {
        let row = sqlx::query("SELECT report FROM android_reports WHERE experiment_id = $1").bind(experiment_id).fetch_optional(&self.pool).await?;
        Ok(row.map(|r| r.get("report")))
    }
}
