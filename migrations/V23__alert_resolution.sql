-- When every alert of a group last seen had resolved (NULL: some alert is
-- firing, or the group never resolved). Set by the notification that
-- resolved the last firing alert, cleared by one that fires an alert
-- again, so a group that flaps shows its latest state.
ALTER TABLE alert_groups ADD COLUMN resolved_at timestamptz;
