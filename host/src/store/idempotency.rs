//! Idempotency keys of start requests, one row per API key and
//! Idempotency-Key: the first request claims the key, and a retry finds
//! the experiment it created.

use sqlx::Row;

use super::{Store, StoreResult, now_ms};

/// What claiming a key found.
#[derive(Debug, PartialEq)]
pub enum Claim {
    /// The key is this request's: go on, then settle it.
    New,
    /// A request with the same body created this experiment.
    Replay(String),
    /// The key was used with another body (or on another platform).
    Mismatch,
    /// A request with this key is still being processed.
    InFlight,
}

/// A claim without an experiment this old belongs to a start that never
/// finished (the host died): the key is free again.
const ABANDONED_MS: i64 = 60_000;

impl Store {
    /// Claims `key` for the caller's request, after forgetting keys older
    /// than `ttl_ms`.
    pub async fn claim_idempotency_key(&self, caller: &str, key: &str, platform: &str, body_hash: &str, ttl_ms: i64) -> StoreResult<Claim> {
        let now = now_ms();
        sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1 OR (experiment_id IS NULL AND created_at < $2)")
            .bind(now - ttl_ms)
            .bind(now - ABANDONED_MS)
            .execute(&self.pool)
            .await?;
        let inserted = sqlx::query(
            "INSERT INTO idempotency_keys (caller, idempotency_key, platform, body_hash, experiment_id, created_at) \
             VALUES ($1, $2, $3, $4, NULL, $5) ON CONFLICT (caller, idempotency_key) DO NOTHING",
        )
        .bind(caller)
        .bind(key)
        .bind(platform)
        .bind(body_hash)
        .bind(now)
        .execute(&self.pool)
        .await?;
        if inserted.rows_affected() == 1 {
            return Ok(Claim::New);
        }
        let row = sqlx::query("SELECT platform, body_hash, experiment_id FROM idempotency_keys WHERE caller = $1 AND idempotency_key = $2")
            .bind(caller)
            .bind(key)
            .fetch_one(&self.pool)
            .await?;
        let (used_platform, used_hash, experiment): (String, String, Option<String>) =
            (row.get("platform"), row.get("body_hash"), row.get("experiment_id"));
        Ok(match experiment {
            _ if used_platform != platform || used_hash != body_hash => Claim::Mismatch,
            Some(id) => Claim::Replay(id),
            None => Claim::InFlight,
        })
    }

    /// Records the experiment a claimed key's request created, or, when it
    /// created none (it was refused), frees the key for a corrected retry.
    pub async fn settle_idempotency_key(&self, caller: &str, key: &str, experiment: Option<&str>) -> StoreResult<()> {
        let sql = match experiment {
            Some(_) => "UPDATE idempotency_keys SET experiment_id = $3 WHERE caller = $1 AND idempotency_key = $2",
            None => "DELETE FROM idempotency_keys WHERE caller = $1 AND idempotency_key = $2 AND experiment_id IS NULL",
        };
        let mut query = sqlx::query(sql).bind(caller).bind(key);
        if let Some(id) = experiment {
            query = query.bind(id);
        }
        query.execute(&self.pool).await?;
        Ok(())
    }
}
