-- Portable SQL: the same schema runs on SQLite and PostgreSQL.
-- Times are milliseconds since the Unix epoch.

CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    role        TEXT NOT NULL,
    key_hash    TEXT NOT NULL UNIQUE,
    key_prefix  TEXT NOT NULL,
    created_by  TEXT,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);

CREATE TABLE experiments (
    id               TEXT PRIMARY KEY,
    platform         TEXT NOT NULL,
    fault_type       TEXT NOT NULL,
    plugin           TEXT NOT NULL,
    state            TEXT NOT NULL,
    phase            TEXT NOT NULL,
    plan             TEXT NOT NULL,
    intensity        DOUBLE PRECISION,
    max_tolerated    DOUBLE PRECISION,
    score            DOUBLE PRECISION,
    result           TEXT,
    error            TEXT,
    stop_reason      TEXT,
    created_by       TEXT NOT NULL,
    created_at       BIGINT NOT NULL,
    phase_started_at BIGINT NOT NULL,
    ended_at         BIGINT
);
CREATE INDEX experiments_by_state ON experiments (state);

-- The journal: a row exists before a driver is called (pending), holds the
-- revert token before the fault counts as active, and is closed on revert.
CREATE TABLE injections (
    id            TEXT PRIMARY KEY,
    experiment_id TEXT NOT NULL REFERENCES experiments (id),
    plugin        TEXT NOT NULL,
    target_id     TEXT NOT NULL,
    target_name   TEXT NOT NULL,
    intensity     DOUBLE PRECISION NOT NULL,
    token         TEXT,
    state         TEXT NOT NULL,
    error         TEXT,
    injected_at   BIGINT NOT NULL,
    reverted_at   BIGINT
);
CREATE INDEX injections_by_state ON injections (state);
CREATE INDEX injections_by_experiment ON injections (experiment_id);

CREATE TABLE samples (
    experiment_id TEXT NOT NULL REFERENCES experiments (id),
    seq           INTEGER NOT NULL,
    at_ms         BIGINT NOT NULL,
    phase         TEXT NOT NULL,
    intensity     DOUBLE PRECISION,
    health        DOUBLE PRECISION NOT NULL,
    metrics       TEXT NOT NULL,
    PRIMARY KEY (experiment_id, seq)
);

-- What happened to an experiment, in order: phases, adjustments, failures.
CREATE TABLE events (
    experiment_id TEXT NOT NULL REFERENCES experiments (id),
    seq           INTEGER NOT NULL,
    at_ms         BIGINT NOT NULL,
    kind          TEXT NOT NULL,
    detail        TEXT NOT NULL,
    PRIMARY KEY (experiment_id, seq)
);
