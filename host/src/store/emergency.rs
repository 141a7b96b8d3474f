//! Emergency stops: engaged by an admin, in force until an admin lifts them.

use sqlx::Row;

use super::{Store, StoreResult};

#[derive(Debug, Clone, PartialEq)]
pub struct EmergencyStopRow {
    pub id: String,
    pub engaged_by: String,
    pub engaged_at: i64,
    pub reason: Option<String>,
    pub lifted_by: Option<String>,
    pub lifted_at: Option<i64>,
}

impl Store {
    pub async fn insert_emergency_stop(&self, row: &EmergencyStopRow) -> StoreResult<()> {
        sqlx::query("INSERT INTO emergency_stops (id, engaged_by, engaged_at, reason) VALUES ($1, $2, $3, $4)")
            .bind(&row.id)
            .bind(&row.engaged_by)
            .bind(row.engaged_at)
            .bind(&row.reason)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// The emergency stop in force, if one is.
    pub async fn engaged_emergency_stop(&self) -> StoreResult<Option<EmergencyStopRow>> {
        let row = sqlx::query(
            "SELECT id, engaged_by, engaged_at, reason, lifted_by, lifted_at FROM emergency_stops \
             WHERE lifted_at IS NULL ORDER BY engaged_at DESC LIMIT 1",
        )
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|r| EmergencyStopRow {
            id: r.get("id"),
            engaged_by: r.get("engaged_by"),
            engaged_at: r.get("engaged_at"),
            reason: r.get("reason"),
            lifted_by: r.get("lifted_by"),
            lifted_at: r.get("lifted_at"),
        }))
    }

    /// Lifts every emergency stop in force.
    pub async fn lift_emergency_stops(&self, by: &str, at: i64) -> StoreResult<()> {
        sqlx::query("UPDATE emergency_stops SET lifted_by = $1, lifted_at = $2 WHERE lifted_at IS NULL")
            .bind(by)
            .bind(at)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
