use sqlx::Row;

use super::{Store, StoreResult, now_ms};

/// An experiment as stored. `plan` and `result` are JSON written by the engine.
#[derive(Debug, Clone)]
pub struct ExperimentRow {
    pub id: String,
    pub platform: String,
    pub fault_type: String,
    pub plugin: String,
    pub state: String,
    pub phase: String,
    pub plan: String,
    pub intensity: Option<f64>,
    pub max_tolerated: Option<f64>,
    pub score: Option<f64>,
    pub result: Option<String>,
    pub error: Option<String>,
    pub stop_reason: Option<String>,
    pub created_by: String,
    pub created_at: i64,
    pub phase_started_at: i64,
    pub ended_at: Option<i64>,
}

fn experiment_row(r: &sqlx::sqlite::SqliteRow) -> ExperimentRow {
    ExperimentRow {
        id: r.get("id"),
        platform: r.get("platform"),
        fault_type: r.get("fault_type"),
        plugin: r.get("plugin"),
        state: r.get("state"),
        phase: r.get("phase"),
        plan: r.get("plan"),
        intensity: r.get("intensity"),
        max_tolerated: r.get("max_tolerated"),
        score: r.get("score"),
        result: r.get("result"),
        error: r.get("error"),
        stop_reason: r.get("stop_reason"),
        created_by: r.get("created_by"),
        created_at: r.get("created_at"),
        phase_started_at: r.get("phase_started_at"),
        ended_at: r.get("ended_at"),
    }
}

/// One observation of the system under test.
#[derive(Debug, Clone)]
pub struct SampleRow {
    pub seq: i64,
    pub at_ms: i64,
    pub phase: String,
    pub intensity: Option<f64>,
    pub health: f64,
    pub metrics: String,
}

/// One entry of an experiment's timeline.
#[derive(Debug, Clone)]
pub struct EventRow {
    pub at_ms: i64,
    pub kind: String,
    pub detail: String,
}

impl Store {
    pub async fn insert_experiment(&self, e: &ExperimentRow) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO experiments (id, platform, fault_type, plugin, state, phase, plan, intensity, \
             created_by, created_at, phase_started_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(&e.id)
        .bind(&e.platform)
        .bind(&e.fault_type)
        .bind(&e.plugin)
        .bind(&e.state)
        .bind(&e.phase)
        .bind(&e.plan)
        .bind(e.intensity)
        .bind(&e.created_by)
        .bind(e.created_at)
        .bind(e.phase_started_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn experiment(&self, id: &str) -> StoreResult<Option<ExperimentRow>> {
        let row = sqlx::query("SELECT * FROM experiments WHERE id = $1").bind(id).fetch_optional(&self.pool).await?;
        Ok(row.as_ref().map(experiment_row))
    }

    pub async fn experiments_in_state(&self, state: &str) -> StoreResult<Vec<ExperimentRow>> {
        let rows = sqlx::query("SELECT * FROM experiments WHERE state = $1 ORDER BY created_at")
            .bind(state)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(experiment_row).collect())
    }

    /// Number of experiments in each state.
    pub async fn count_experiments_by_state(&self) -> StoreResult<Vec<(String, i64)>> {
        let rows = sqlx::query("SELECT state, COUNT(*) AS n FROM experiments GROUP BY state")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|r| (r.get("state"), r.get("n"))).collect())
    }

    pub async fn set_phase(&self, id: &str, phase: &str) -> StoreResult<()> {
        sqlx::query("UPDATE experiments SET phase = $1, phase_started_at = $2 WHERE id = $3")
            .bind(phase)
            .bind(now_ms())
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn set_intensity(&self, id: &str, intensity: f64, max_tolerated: Option<f64>) -> StoreResult<()> {
        sqlx::query("UPDATE experiments SET intensity = $1, max_tolerated = $2 WHERE id = $3")
            .bind(intensity)
            .bind(max_tolerated)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Ends an experiment: final state, phase completed, score and result.
    /// Only once: whoever records the end first (the run, or its
    /// supervisor) keeps it.
    #[allow(clippy::too_many_arguments)]
    pub async fn finish_experiment(
        &self,
        id: &str,
        state: &str,
        score: Option<f64>,
        result: Option<&str>,
        error: Option<&str>,
        stop_reason: Option<&str>,
    ) -> StoreResult<()> {
        let now = now_ms();
        sqlx::query(
            "UPDATE experiments SET state = $1, phase = 'completed', phase_started_at = $2, ended_at = $2, \
             score = $3, result = $4, error = $5, stop_reason = $6 WHERE id = $7 AND state = 'running'",
        )
        .bind(state)
        .bind(now)
        .bind(score)
        .bind(result)
        .bind(error)
        .bind(stop_reason)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn insert_sample(&self, id: &str, s: &SampleRow) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO samples (experiment_id, seq, at_ms, phase, intensity, health, metrics) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(id)
        .bind(s.seq)
        .bind(s.at_ms)
        .bind(&s.phase)
        .bind(s.intensity)
        .bind(s.health)
        .bind(&s.metrics)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn samples(&self, id: &str) -> StoreResult<Vec<SampleRow>> {
        let rows = sqlx::query("SELECT * FROM samples WHERE experiment_id = $1 ORDER BY seq")
            .bind(id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .iter()
            .map(|r| SampleRow {
                seq: r.get("seq"),
                at_ms: r.get("at_ms"),
                phase: r.get("phase"),
                intensity: r.get("intensity"),
                health: r.get("health"),
                metrics: r.get("metrics"),
            })
            .collect())
    }

    /// Appends to an experiment's timeline.
    pub async fn add_event(&self, id: &str, kind: &str, detail: &str) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO events (experiment_id, seq, at_ms, kind, detail) \
             SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3, $4 FROM events WHERE experiment_id = $1",
        )
        .bind(id)
        .bind(now_ms())
        .bind(kind)
        .bind(detail)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub async fn events(&self, id: &str) -> StoreResult<Vec<EventRow>> {
        let rows = sqlx::query("SELECT at_ms, kind, detail FROM events WHERE experiment_id = $1 ORDER BY seq")
            .bind(id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(|r| EventRow { at_ms: r.get("at_ms"), kind: r.get("kind"), detail: r.get("detail") }).collect())
    }

    /// Retention: deletes the samples and events of experiments that ended
    /// before `before_ms`, and audit rows older than it. The experiments
    /// themselves (state, score, result) and the journal are kept.
    pub async fn prune(&self, before_ms: i64) -> StoreResult<u64> {
        let ended = "SELECT id FROM experiments WHERE ended_at IS NOT NULL AND ended_at < $1";
        let mut deleted = 0;
        for table in ["samples", "events", "vitals", "web_traffic", "android_reports"] {
            let done = sqlx::query(&format!("DELETE FROM {table} WHERE experiment_id IN ({ended})")).bind(before_ms).execute(&self.pool).await?;
            deleted += done.rows_affected();
        }
        let done = sqlx::query("DELETE FROM audit_events WHERE at_ms < $1").bind(before_ms).execute(&self.pool).await?;
        Ok(deleted + done.rows_affected())
    }
}
