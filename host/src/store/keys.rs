use sqlx::Row;

use super::{Store, StoreResult, now_ms};

/// An API key as stored: only the hash of the key, never the key.
#[derive(Debug, Clone)]
pub struct KeyRow {
    pub id: String,
    pub name: String,
    pub role: String,
    pub key_prefix: String,
    pub created_by: Option<String>,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

fn key_row(r: &sqlx::sqlite::SqliteRow) -> KeyRow {
    KeyRow {
        id: r.get("id"),
        name: r.get("name"),
        role: r.get("role"),
        key_prefix: r.get("key_prefix"),
        created_by: r.get("created_by"),
        created_at: r.get("created_at"),
        revoked_at: r.get("revoked_at"),
    }
}

const KEY_COLUMNS: &str = "id, name, role, key_prefix, created_by, created_at, revoked_at";

impl Store {
    pub async fn insert_key(&self, row: &KeyRow, key_hash: &str) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO api_keys (id, name, role, key_hash, key_prefix, created_by, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&row.id)
        .bind(&row.name)
        .bind(&row.role)
        .bind(key_hash)
        .bind(&row.key_prefix)
        .bind(&row.created_by)
        .bind(row.created_at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The live (not revoked) key with this hash.
    pub async fn key_by_hash(&self, key_hash: &str) -> StoreResult<Option<KeyRow>> {
        let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL");
        let row = sqlx::query(&sql).bind(key_hash).fetch_optional(&self.pool).await?;
        Ok(row.as_ref().map(key_row))
    }

    pub async fn list_keys(&self) -> StoreResult<Vec<KeyRow>> {
        let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at, id");
        let rows = sqlx::query(&sql).fetch_all(&self.pool).await?;
        Ok(rows.iter().map(key_row).collect())
    }

    pub async fn count_keys(&self) -> StoreResult<i64> {
        Ok(sqlx::query("SELECT COUNT(*) AS n FROM api_keys").fetch_one(&self.pool).await?.get("n"))
    }

    /// Live admin keys other than `except`.
    pub async fn count_other_admins(&self, except: &str) -> StoreResult<i64> {
        let row = sqlx::query(
            "SELECT COUNT(*) AS n FROM api_keys WHERE role = 'admin' AND revoked_at IS NULL AND id <> $1",
        )
        .bind(except)
        .fetch_one(&self.pool)
        .await?;
        Ok(row.get("n"))
    }

    /// Revokes a key; false when there is no live key with that id.
    pub async fn revoke_key(&self, id: &str) -> StoreResult<bool> {
        let done = sqlx::query("UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
            .bind(now_ms())
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() == 1)
    }

    pub async fn key_by_id(&self, id: &str) -> StoreResult<Option<KeyRow>> {
        let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = $1");
        let row = sqlx::query(&sql).bind(id).fetch_optional(&self.pool).await?;
        Ok(row.as_ref().map(key_row))
    }
}
