-- The Android platform: uploaded APKs, kept by content (one row and one
-- file per distinct APK), and what each experiment's device reported
-- (crashes, ANRs, the app's state, expectations), kept as JSON.
CREATE TABLE apks (
    id           TEXT PRIMARY KEY,
    sha256       TEXT NOT NULL UNIQUE,
    package      TEXT NOT NULL,
    activity     TEXT NOT NULL,
    version_code BIGINT,
    version_name TEXT,
    min_sdk      INTEGER,
    target_sdk   INTEGER,
    label        TEXT,
    size         BIGINT NOT NULL,
    path         TEXT NOT NULL,
    uploaded_by  TEXT NOT NULL,
    uploaded_at  BIGINT NOT NULL
);

CREATE TABLE android_reports (
    experiment_id TEXT PRIMARY KEY REFERENCES experiments (id),
    report        TEXT NOT NULL,
    updated_at    BIGINT NOT NULL
);
