//! The injection journal: what a restarted host needs to undo every fault.

use sqlx::Row;

use super::{Store, StoreResult, now_ms};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InjectionState {
    /// The driver is being called; no token yet.
    Pending,
    /// Injected, with a token that undoes it.
    Active,
    /// A revert failed; the reconciler retries it with backoff until it
    /// succeeds or the fault's time-to-live has ended it. Still open.
    Retrying,
    /// Undone.
    Reverted,
    /// Never reverted, but past its time-to-live: the effect ended itself.
    Expired,
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
            InjectionState::Retrying => "retrying",
            InjectionState::Reverted => "reverted",
            InjectionState::Expired => "expired",
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
    /// SHA-256 of the plugin build that made it: the build that reverts it.
    pub plugin_digest: Option<String>,
    /// When the fault's own time-to-live ends it, whatever the host does.
    pub expires_at: Option<i64>,
    /// Failed reverts so far.
    pub attempts: i64,
    /// When the reconciler tries again (retrying rows).
    pub next_attempt_at: Option<i64>,
    /// The scenario that made it (its index in the plan); none for the
    /// primary fault and for platform resources.
    pub scenario: Option<i64>,
}

/// The states of a row that still needs a revert (or a closing word).
pub const OPEN_STATES: [&str; 3] = ["pending", "active", "retrying"];
const OPEN: &str = "('pending', 'active', 'retrying')";

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
        plugin_digest: r.get("plugin_digest"),
        expires_at: r.get("expires_at"),
        attempts: r.get("attempts"),
        next_attempt_at: r.get("next_attempt_at"),
        scenario: r.get("scenario"),
    }
}

impl Store {
    /// Records that a driver is about to be called for a target.
    pub async fn journal_pending(&self, row: &InjectionRow) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO injections (id, experiment_id, plugin, target_id, target_name, intensity, state, injected_at, plugin_digest, expires_at, scenario) \
             VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8, $9, $10)",
        )
        .bind(&row.id)
        .bind(&row.experiment_id)
        .bind(&row.plugin)
        .bind(&row.target_id)
        .bind(&row.target_name)
        .bind(row.intensity)
        .bind(row.injected_at)
        .bind(&row.plugin_digest)
        .bind(row.expires_at)
        .bind(row.scenario)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Stores the token that undoes an injection; from here on it is active.
    /// Like every update below, it touches only an open row: a late write of
    /// a run its supervisor cut off cannot reopen what was settled.
    pub async fn journal_active(&self, id: &str, token: &str, intensity: f64) -> StoreResult<()> {
        sqlx::query(&format!("UPDATE injections SET token = $1, intensity = $2, state = 'active' WHERE id = $3 AND state IN {OPEN}"))
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
        sqlx::query(&format!("UPDATE injections SET state = $1, error = $2, reverted_at = $3 WHERE id = $4 AND state IN {OPEN}"))
            .bind(state.as_str())
            .bind(error)
            .bind(reverted_at)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Notes why an open injection is not reverted yet, so status shows it.
    pub async fn journal_note(&self, id: &str, error: &str) -> StoreResult<()> {
        sqlx::query("UPDATE injections SET error = $1 WHERE id = $2").bind(error).bind(id).execute(&self.pool).await?;
        Ok(())
    }

    /// A revert failed: hands the row, with the token that undoes it, to the
    /// reconciler, which tries again at `next_attempt_at`.
    pub async fn journal_retry(&self, id: &str, token: &str, error: &str, next_attempt_at: i64) -> StoreResult<()> {
        sqlx::query(&format!(
            "UPDATE injections SET state = 'retrying', token = $1, error = $2, attempts = attempts + 1, next_attempt_at = $3 \
             WHERE id = $4 AND state IN {OPEN}"
        ))
        .bind(token)
        .bind(error)
        .bind(next_attempt_at)
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Takes an open row for one revert attempt, so that the reconciler,
    /// a supervisor and a restart never revert it at once: false if it is
    /// closed, or someone else holds it until `held_until`.
    pub async fn journal_claim(&self, id: &str, now: i64, held_until: i64) -> StoreResult<bool> {
        let claimed = sqlx::query(&format!(
            "UPDATE injections SET next_attempt_at = $1 WHERE id = $2 AND state IN {OPEN} AND COALESCE(next_attempt_at, 0) <= $3"
        ))
        .bind(held_until)
        .bind(id)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(claimed.rows_affected() == 1)
    }

    /// Open rows the reconciler should look at now: retries that are due,
    /// and rows of experiments no run holds any more (a write that failed
    /// left them open), once their claim has lapsed.
    pub async fn due_open_injections(&self, now: i64) -> StoreResult<Vec<InjectionRow>> {
        let rows = sqlx::query(&format!(
            "SELECT * FROM injections WHERE state IN {OPEN} AND COALESCE(next_attempt_at, 0) <= $1 ORDER BY injected_at"
        ))
        .bind(now)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows.iter().map(injection_row).collect())
    }

    /// One experiment's injections that are not closed yet.
    pub async fn open_injections_of(&self, experiment_id: &str) -> StoreResult<Vec<InjectionRow>> {
        let rows = sqlx::query(&format!("SELECT * FROM injections WHERE experiment_id = $1 AND state IN {OPEN} ORDER BY injected_at"))
            .bind(experiment_id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(injection_row).collect())
    }

    /// Whether any open injection was made by the plugin build with this digest.
    pub async fn build_has_open_injections(&self, digest: &str) -> StoreResult<bool> {
        let row = sqlx::query(&format!("SELECT COUNT(*) AS n FROM injections WHERE plugin_digest = $1 AND state IN {OPEN}"))
            .bind(digest)
            .fetch_one(&self.pool)
            .await?;
        Ok(row.get::<i64, _>("n") > 0)
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
        let rows = sqlx::query(&format!("SELECT * FROM injections WHERE state IN {OPEN} ORDER BY injected_at"))
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(injection_row).collect())
    }
}
