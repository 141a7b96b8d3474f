-- Timed scenarios: each runs its own fault besides the experiment's
-- primary one; its journal rows name the scenario's index in the plan
-- (NULL for the primary fault and for platform resources).
ALTER TABLE injections ADD COLUMN scenario INTEGER;
