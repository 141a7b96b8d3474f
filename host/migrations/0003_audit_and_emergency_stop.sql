-- Who did what through the API, and how it ended: starts, stops, emergency
-- stops, keys, plugins. Ids are UUIDv7, so they sort by time.
CREATE TABLE audit_events (
    id        TEXT PRIMARY KEY,
    at_ms     BIGINT NOT NULL,
    -- The caller's key; null for what the host or its CLI did itself.
    key_id    TEXT,
    actor     TEXT NOT NULL,
    role      TEXT,
    action    TEXT NOT NULL,
    subject   TEXT,
    -- succeeded, refused (a 4xx) or failed (a 5xx).
    outcome   TEXT NOT NULL,
    status    INTEGER,
    code      TEXT,
    detail    TEXT
);
CREATE INDEX audit_events_by_action ON audit_events (action);

-- Emergency stops: while a row has no lifted_at, no experiment starts.
CREATE TABLE emergency_stops (
    id         TEXT PRIMARY KEY,
    engaged_by TEXT NOT NULL,
    engaged_at BIGINT NOT NULL,
    reason     TEXT,
    lifted_by  TEXT,
    lifted_at  BIGINT
);
