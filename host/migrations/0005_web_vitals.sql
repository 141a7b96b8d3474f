-- The frontend platform: Core Web Vitals the collector reports, one row per
-- page load and vital (a later report of the same load updates it), and
-- the traffic the fault proxy saw in each phase.
CREATE TABLE vitals (
    experiment_id TEXT NOT NULL REFERENCES experiments (id),
    -- The collector's id of the page load's measurement.
    metric_id     TEXT NOT NULL,
    name          TEXT NOT NULL,
    phase         TEXT NOT NULL,
    value         DOUBLE PRECISION NOT NULL,
    rating        TEXT NOT NULL,
    page          TEXT NOT NULL,
    received_at   BIGINT NOT NULL,
    PRIMARY KEY (experiment_id, name, metric_id)
);
CREATE INDEX vitals_by_time ON vitals (experiment_id, received_at);

CREATE TABLE web_traffic (
    experiment_id TEXT PRIMARY KEY REFERENCES experiments (id),
    -- JSON: phase name to its traffic summary.
    phases        TEXT NOT NULL,
    updated_at    BIGINT NOT NULL
);
