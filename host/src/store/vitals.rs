//! Web vitals and the fault proxy's traffic of frontend experiments.

use sqlx::Row;

use super::{Store, StoreResult};

/// One vital of one page load.
#[derive(Debug, Clone, PartialEq)]
pub struct VitalRow {
    pub experiment_id: String,
    pub metric_id: String,
    pub name: String,
    pub phase: String,
    pub value: f64,
    pub rating: String,
    pub page: String,
    pub received_at: i64,
}

impl Store {
    /// Records a vital; a later report of the same page load's vital
    /// replaces its value (CLS and INP grow while the page lives).
    pub async fn record_vital(&self, v: &VitalRow) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO vitals (experiment_id, metric_id, name, phase, value, rating, page, received_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (experiment_id, name, metric_id) DO UPDATE SET value = excluded.value, rating = excluded.rating, received_at = excluded.received_at",
        )
        .bind(&v.experiment_id)
        .bind(&v.metric_id)
        .bind(&v.name)
        .bind(&v.phase)
        .bind(v.value)
        .bind(&v.rating)
        .bind(&v.page)
        .bind(v.received_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// An experiment's vitals received at or after `since` (epoch ms).
    pub async fn vitals(&self, experiment_id: &str, since: i64) -> StoreResult<Vec<VitalRow>> {
        let rows = sqlx::query("SELECT * FROM vitals WHERE experiment_id = $1 AND received_at >= $2 ORDER BY received_at")
            .bind(experiment_id)
            .bind(since)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .iter()
            .map(|r| VitalRow {
                experiment_id: r.get("experiment_id"),
                metric_id: r.get("metric_id"),
                name: r.get("name"),
                phase: r.get("phase"),
                value: r.get("value"),
                rating: r.get("rating"),
                page: r.get("page"),
                received_at: r.get("received_at"),
            })
            .collect())
    }

    /// Saves the proxy's per-phase traffic of an experiment (JSON).
    pub async fn save_web_traffic(&self, experiment_id: &str, phases: &str, at: i64) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO web_traffic (experiment_id, phases, updated_at) VALUES ($1, $2, $3)
             ON CONFLICT (experiment_id) DO UPDATE SET phases = excluded.phases, updated_at = excluded.updated_at",
        )
        .bind(experiment_id)
        .bind(phases)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn web_traffic(&self, experiment_id: &str) -> StoreResult<Option<String>> {
        let row = sqlx::query("SELECT phases FROM web_traffic WHERE experiment_id = $1").bind(experiment_id).fetch_optional(&self.pool).await?;
        Ok(row.map(|r| r.get("phases")))
    }
}
