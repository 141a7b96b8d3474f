-- Failed reverts are retried by the reconciler until they succeed or the
-- fault's time-to-live has ended it; a row names the plugin build that made
-- it, so a replaced or unloaded plugin's build is kept until its rows close.
ALTER TABLE injections ADD COLUMN plugin_digest TEXT;
ALTER TABLE injections ADD COLUMN expires_at BIGINT;
ALTER TABLE injections ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE injections ADD COLUMN next_attempt_at BIGINT;
