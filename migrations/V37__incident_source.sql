-- Where an incident came from, so lists can be filtered by it: a person
-- (CreateIncident, `manual`), an Alertmanager notification (`alert`,
-- written with its alert group) or a schedule's tick (`schedule`, written
-- with the tick). Set once, at insertion; incidents from before this
-- migration get theirs from the alert group or tick that made them.
ALTER TABLE incidents ADD COLUMN source text NOT NULL DEFAULT 'manual'
    CHECK (source IN ('manual', 'alert', 'schedule'));

UPDATE incidents SET source = 'alert'
    WHERE id IN (SELECT incident_id FROM alert_groups);
UPDATE incidents SET source = 'schedule'
    WHERE id IN (SELECT incident_id FROM schedule_ticks WHERE incident_id IS NOT NULL);

-- ListIncidents filtered by source: one range scan, newest first, as
-- `incidents_by_tenant` (V16) is for the unfiltered list.
CREATE INDEX incidents_by_tenant_source ON incidents (tenant, source, id DESC);
