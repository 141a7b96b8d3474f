//! The audit trail: one row per audited action, newest last by id (UUIDv7).

use sqlx::Row;

use super::{Store, StoreResult, now_ms};

/// One audited action.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRow {
    pub id: String,
    pub at_ms: i64,
    /// The caller's key; none for what the host or its CLI did itself.
    pub key_id: Option<String>,
    /// The key's name, or `host` / `cli`.
    pub actor: String,
    pub role: Option<String>,
    pub action: String,
    /// What it acted on: an experiment id, a key or plugin name.
    pub subject: Option<String>,
    /// `succeeded`, `refused` or `failed`.
    pub outcome: String,
    pub status: Option<i64>,
    /// The problem code of a refusal or failure.
    pub code: Option<String>,
    /// JSON with what else is worth keeping (the fault and targets of a
    /// start, the experiments an emergency stop halted, the refusal's text).
    pub detail: Option<String>,
}

impl AuditRow {
    /// A row for an action the host took on its own (`actor` is `host` or `cli`).
    pub fn by_host(actor: &str, action: &str, subject: &str, outcome: &str, detail: Option<String>) -> Self {
        AuditRow {
            id: uuid::Uuid::now_v7().to_string(),
            at_ms: now_ms(),
            key_id: None,
            actor: actor.into(),
            role: None,
            action: action.into(),
            subject: Some(subject.into()),
            outcome: outcome.into(),
            status: None,
            code: None,
            detail,
        }
    }
}

/// Which rows a listing wants.
#[derive(Debug, Default)]
pub struct AuditQuery {
    pub action: Option<String>,
    pub actor: Option<String>,
    pub outcome: Option<String>,
    /// Rows older than this id (paging back from the newest).
    pub before: Option<String>,
    pub limit: i64,
}

const COLUMNS: &str = "id, at_ms, key_id, actor, role, action, subject, outcome, status, code, detail";

impl Store {
    pub async fn record_audit(&self, row: &AuditRow) -> StoreResult<()> {
        let sql = format!("INSERT INTO audit_events ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)");
        sqlx::query(&sql)
            .bind(&row.id)
            .bind(row.at_ms)
            .bind(&row.key_id)
            .bind(&row.actor)
            .bind(&row.role)
            .bind(&row.action)
            .bind(&row.subject)
            .bind(&row.outcome)
            .bind(row.status)
            .bind(&row.code)
            .bind(&row.detail)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Newest first.
    pub async fn audit_events(&self, q: &AuditQuery) -> StoreResult<Vec<AuditRow>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM audit_events WHERE ($1 IS NULL OR action = $1) AND ($2 IS NULL OR actor = $2) \
             AND ($3 IS NULL OR outcome = $3) AND ($4 IS NULL OR id < $4) ORDER BY id DESC LIMIT $5"
        );
        let rows = sqlx::query(&sql)
            .bind(&q.action)
            .bind(&q.actor)
            .bind(&q.outcome)
            .bind(&q.before)
            .bind(q.limit)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .iter()
            .map(|r| AuditRow {
                id: r.get("id"),
                at_ms: r.get("at_ms"),
                key_id: r.get("key_id"),
                actor: r.get("actor"),
                role: r.get("role"),
                action: r.get("action"),
                subject: r.get("subject"),
                outcome: r.get("outcome"),
                status: r.get("status"),
                code: r.get("code"),
                detail: r.get("detail"),
            })
            .collect())
    }
}
