//! The injection journal: what a restarted host needs to undo every fault.

use sqlx::Row;

use super::{Store, StoreResult, now_ms};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InjectionState {
    /// The driver is being called; no token yet.
    Pending,
    /// Injected, with a token that undoes it.
    Active,
    /// Undone.
    Reverted,
    /// The driver failed before injecting anything it could name.
    Failed,
    /// A host died between calling the driver and storing its token: no token
    /// to revert with; the fault's own time-to-live ends it.
    Unknown,
}

impl InjectionState {
    pub fn as_str(self) -> &'static str {
        match self {
            InjectionState::Pending => "pending",
            InjectionState::Active => "active",
            InjectionState::Reverted => "reverted",
            InjectionState::Failed => "failed",
            InjectionState::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone)]
pub struct InjectionRow {
    pub id: String,
    pub experiment_id: String,
    pub plugin: String,
    pub target_id: String,
    pub target_name: String,
    pub intensity: f64,
    pub token: Option<String>,
    pub state: String,
    pub error: Option<String>,
    pub injected_at: i64,
    pub reverted_at: Option<i64>,
}

fn injection_row(r: &sqlx::sqlite::SqliteRow) -> InjectionRow {
    InjectionRow {
        id: r.get("id"),
        experiment_id: r.get("experiment_id"),
        plugin: r.get("plugin"),
        target_id: r.get("target_id"),
        target_name: r.get("target_name"),
        intensity: r.get("intensity"),
        token: r.get("token"),
        state: r.get("state"),
        error: r.get("error"),
        injected_at: r.get("injected_at"),
        reverted_at: r.get("reverted_at"),
    }
}

impl Store {
    /// Records that a driver is about to be called for a target.
    pub async fn journal_pending(&self, row: &InjectionRow) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO injections (id, experiment_id, plugin, target_id, target_name, intensity, state, injected_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7)",
        )
        .bind(&row.id)
        .bind(&row.experiment_id)
        .bind(&row.plugin)
        .bind(&row.target_id)
        .bind(&row.target_name)
        .bind(row.intensity)
        .bind(row.injected_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Stores the token that undoes an injection; from here on it is active.
    pub async fn journal_active(&self, id: &str, token: &str, intensity: f64) -> StoreResult<()> {
        sqlx::query("UPDATE injections SET token = $1, intensity = $2, state = 'active' WHERE id = $3")
            .bind(token)
            .bind(intensity)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Closes an injection in a final state, with the reason when it failed.
    pub async fn journal_close(&self, id: &str, state: InjectionState, error: Option<&str>) -> StoreResult<()> {
        let reverted_at = (state == InjectionState::Reverted).then(now_ms);
        sqlx::query("UPDATE injections SET state = $1, error = $2, reverted_at = $3 WHERE id = $4")
            .bind(state.as_str())
            .bind(error)
            .bind(reverted_at)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Notes a failed revert on a still-active injection, so status shows it.
    pub async fn journal_note(&self, id: &str, error: &str) -> StoreResult<()> {
        sqlx::query("UPDATE injections SET error = $1 WHERE id = $2").bind(error).bind(id).execute(&self.pool).await?;
        Ok(())
    }

    pub async fn injections(&self, experiment_id: &str) -> StoreResult<Vec<InjectionRow>> {
        let rows = sqlx::query("SELECT * FROM injections WHERE experiment_id = $1 ORDER BY injected_at, id")
            .bind(experiment_id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(injection_row).collect())
    }

    /// Every injection not yet closed, across experiments: what a restart reverts.
    pub async fn open_injections(&self) -> StoreResult<Vec<InjectionRow>> {
        let rows = sqlx::query("SELECT * FROM injections WHERE state IN ('pending', 'active') ORDER BY injected_at")
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(injection_row).collect())
    }

    /// Open injections made by one plugin: it cannot be unloaded while any exist.
    pub async fn open_injections_of_plugin(&self, plugin: &str) -> StoreResult<i64> {
        let row = sqlx::query("SELECT COUNT(*) AS n FROM injections WHERE plugin = $1 AND state IN ('pending', 'active')")
            .bind(plugin)
            .fetch_one(&self.pool)
            .await?;
        Ok(row.get("n"))
    }
}
