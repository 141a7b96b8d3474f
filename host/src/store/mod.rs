//! Persistence through sqlx. SQLite in the data directory is the embedded
//! default; the SQL is kept portable so PostgreSQL can follow on the same code.

mod android;
mod audit;
mod emergency;
mod experiments;
mod idempotency;
mod journal;
mod keys;
mod vitals;

use std::path::Path;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::SqlitePool;

pub use android::ApkRow;
pub use audit::{AuditQuery, AuditRow};
pub use emergency::EmergencyStopRow;
pub use experiments::{EventRow, ExperimentRow, SampleRow};
pub use idempotency::Claim;
pub use journal::{InjectionRow, InjectionState, OPEN_STATES};
pub use keys::KeyRow;
pub use vitals::VitalRow;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
    #[error("migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

#[derive(Clone)]
pub struct Store {
    pool: SqlitePool,
}

impl Store {
    /// Opens (creating if needed) the SQLite store at `path` and migrates it.
    pub async fn open_sqlite(path: &Path) -> StoreResult<Store> {
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
            .create_if_missing(true)
            // WAL with NORMAL sync: a journal row survives a killed process.
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(std::time::Duration::from_secs(5));
        let pool = SqlitePoolOptions::new().max_connections(8).connect_with(options).await?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        Ok(Store { pool })
    }

    /// Answers when the database does.
    pub async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}

/// Milliseconds since the Unix epoch, the store's time unit.
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or_default()
}
