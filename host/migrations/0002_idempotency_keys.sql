-- Start requests retried with the same Idempotency-Key: which experiment
-- the first one created, per API key, for a day. A row without an
-- experiment is a start still in progress.
CREATE TABLE idempotency_keys (
    caller          TEXT NOT NULL,
    idempotency_key TEXT NOT NULL,
    platform        TEXT NOT NULL,
    body_hash       TEXT NOT NULL,
    experiment_id   TEXT,
    created_at      BIGINT NOT NULL,
    PRIMARY KEY (caller, idempotency_key)
);
