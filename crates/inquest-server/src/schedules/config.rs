//! `[[schedules]]`: investigations that start by the clock, such as "every
//! weekday at 08:00, review the error budget burn".
//!
//! ```toml
//! [[schedules]]
//! name = "error-budget"            # the ticks' key in the database: keep it stable
//! cron = "0 8 * * 1-5"             # 5 fields: minute hour day-of-month month day-of-week
//! timezone = "Europe/Berlin"       # an IANA name; default UTC
//! tenant = "default"
//! title = "Error budget review"
//! prompt = "Review the error budget burn of the last 24 hours and say what stands out."
//! catch_up = "latest"              # ticks missed while no replica ran: "latest" or "none"
//! skills = ["slo"]                 # the [[skills]] its sessions load; default: every one
//! ```

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use croner::{
    Cron,
    parser::{CronParser, Seconds, Year},
};
use serde::Deserialize;

/// What to do with ticks missed while no replica was running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatchUp {
    /// Run the latest missed tick once, at startup.
    #[default]
    Latest,
    /// Run none; wait for the next tick.
    None,
}

impl CatchUp {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Latest => "latest",
            Self::None => "none",
        }
    }
}

/// One `[[schedules]]` entry as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleEntry {
    pub name: String,
    pub cron: String,
    #[serde(default = "utc")]
    pub timezone: String,
    #[serde(default = "default_tenant")]
    pub tenant: String,
    pub title: String,
    pub prompt: String,
    #[serde(default)]
    pub catch_up: CatchUp,
    /// The `[[skills]]` (by name) its sessions load; left out, every
    /// configured one.
    #[serde(default)]
    pub skills: Option<Vec<String>>,
}

fn utc() -> String {
    "UTC".into()
}

fn default_tenant() -> String {
    inquest_core::Tenant::default_tenant().as_str().to_owned()
}

/// A schedule ready to run: its expression parsed, its zone known.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub entry: ScheduleEntry,
    pub tenant: inquest_core::Tenant,
    cron: Cron,
    zone: chrono_tz::Tz,
}

/// Parses a 5-field expression: no seconds, no year, so `* * * * * *` is
/// refused rather than read as every second.
fn parse_cron(text: &str) -> Result<Cron, String> {
    let fields = text.split_whitespace().count();
    if fields != 5 {
        return Err(format!(
            "{text:?} has {fields} fields; a cron expression has 5: minute hour day-of-month month day-of-week"
        ));
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(text)
        .map_err(|e| format!("{text:?} is not a cron expression: {e}"))
}

impl ScheduleEntry {
    /// The entry checked and compiled; the error names the schedule and
    /// the field.
    pub fn compile(&self) -> Result<Schedule, String> {
        let name = &self.name;
        if name.trim().is_empty() || name.chars().count() > 100 {
            return Err("schedules: `name` must be 1 to 100 characters".into());
        }
        let cron = parse_cron(&self.cron).map_err(|e| format!("schedules {name:?}: cron: {e}"))?;
        let zone: chrono_tz::Tz = self.timezone.parse().map_err(|_| {
            format!(
                "schedules {name:?}: timezone: {:?} is not an IANA time zone name (e.g. \"UTC\", \"Europe/Berlin\")",
                self.timezone
            )
        })?;
        let tenant = inquest_core::Tenant::parse(&self.tenant)
            .map_err(|e| format!("schedules {name:?}: tenant: {e}"))?;
        if self.title.trim().is_empty() {
            return Err(format!("schedules {name:?}: `title` must not be blank"));
        }
        if self.prompt.trim().is_empty() {
            return Err(format!("schedules {name:?}: `prompt` must not be blank"));
        }
        Ok(Schedule {
            entry: self.clone(),
            tenant,
            cron,
            zone,
        })
    }
}

/// Checks every entry and that names are unique.
pub fn compile_all(entries: &[ScheduleEntry]) -> Result<Vec<Schedule>, String> {
    let mut names = BTreeSet::new();
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        if !names.insert(entry.name.as_str()) {
            return Err(format!(
                "schedules: the name {:?} is used twice",
                entry.name
            ));
        }
        out.push(entry.compile()?);
    }
    Ok(out)
}

/// What a schedule should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Nothing before `next`.
    Wait { next: Option<DateTime<Utc>> },
    /// Fire this tick.
    Fire(DateTime<Utc>),
    /// This tick was missed (no replica ran then) and `catch_up = "none"`:
    /// recorded as skipped, not run.
    Skip(DateTime<Utc>),
}

/// A tick this late was missed: no replica was running when it came.
/// (A running replica looks every second.)
pub const MISSED_AFTER: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

impl Schedule {
    /// The first tick strictly after `t`; `None` when the expression
    /// never matches again (e.g. February 30th).
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron
            .find_next_occurrence(&t.with_timezone(&self.zone), false)
            .ok()
            .map(|d| d.with_timezone(&Utc))
    }

    /// The latest tick at or before `t`.
    fn latest_until(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron
            .find_previous_occurrence(&t.with_timezone(&self.zone), true)
            .ok()
            .map(|d| d.with_timezone(&Utc))
    }

    /// What to do at `now`, when every tick up to `after` is done (the
    /// last tick recorded, or when the schedule was first seen). Only the
    /// latest due tick is ever run: ticks between it and `after` passed
    /// while no replica ran (or the latest would not be due yet).
    pub fn due(&self, now: DateTime<Utc>, after: DateTime<Utc>) -> Due {
        let next = self.next_after(after);
        match next {
            Some(first) if first <= now => {}
            _ => return Due::Wait { next },
        }
        let Some(latest) = self.latest_until(now).filter(|l| *l > after) else {
            return Due::Wait { next };
        };
        if now - latest <= MISSED_AFTER || self.entry.catch_up == CatchUp::Latest {
            Due::Fire(latest)
        } else {
            Due::Skip(latest)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(cron: &str, tz: &str, catch_up: CatchUp) -> ScheduleEntry {
        ScheduleEntry {
            name: "s".into(),
            cron: cron.into(),
            timezone: tz.into(),
            tenant: "default".into(),
            title: "t".into(),
            prompt: "p".into(),
            catch_up,
            skills: None,
        }
    }

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn validation_names_the_bad_field() {
        let bad = |cron: &str, tz: &str| entry(cron, tz, CatchUp::Latest).compile().unwrap_err();
        assert!(bad("* * * *", "UTC").contains("cron: \"* * * *\" has 4 fields"));
        assert!(bad("* * * * * *", "UTC").contains("has 6 fields"));
        assert!(bad("61 * * * *", "UTC").contains("cron:"));
        assert!(bad("0 8 * * 1-5", "Mars/Olympus").contains("timezone: \"Mars/Olympus\""));
        assert!(
            entry("0 8 * * 1-5", "Europe/Berlin", CatchUp::Latest)
                .compile()
                .is_ok()
        );
        let twice = [
            entry("* * * * *", "UTC", CatchUp::Latest),
            entry("* * * * *", "UTC", CatchUp::None),
        ];
        assert!(compile_all(&twice).unwrap_err().contains("used twice"));
    }

    #[test]
    fn a_tick_in_a_zone_is_its_local_time() {
        let s = entry("0 8 * * 1-5", "Europe/Berlin", CatchUp::Latest)
            .compile()
            .unwrap();
        // Friday 2026-12-04 09:00 UTC is 10:00 in Berlin: next is Monday
        // 08:00 Berlin = 07:00 UTC.
        assert_eq!(
            s.next_after(at("2026-12-04T09:00:00Z")),
            Some(at("2026-12-07T07:00:00Z"))
        );
    }

    #[test]
    fn the_tick_that_just_came_fires_once() {
        let s = entry("*/5 * * * *", "UTC", CatchUp::None)
            .compile()
            .unwrap();
        let after = at("2026-12-05T10:00:00Z");
        assert_eq!(
            s.due(at("2026-12-05T10:04:59Z"), after),
            Due::Wait {
                next: Some(at("2026-12-05T10:05:00Z"))
            }
        );
        assert_eq!(
            s.due(at("2026-12-05T10:05:01Z"), after),
            Due::Fire(at("2026-12-05T10:05:00Z"))
        );
        // Once recorded, nothing until the next.
        let fired = at("2026-12-05T10:05:00Z");
        assert_eq!(
            s.due(at("2026-12-05T10:05:30Z"), fired),
            Due::Wait {
                next: Some(at("2026-12-05T10:10:00Z"))
            }
        );
    }

    #[test]
    fn missed_ticks_follow_catch_up() {
        let after = at("2026-12-05T08:00:00Z");
        let now = at("2026-12-05T10:07:00Z");
        let latest = entry("*/5 * * * *", "UTC", CatchUp::Latest)
            .compile()
            .unwrap();
        assert_eq!(
            latest.due(now, after),
            Due::Fire(at("2026-12-05T10:05:00Z"))
        );
        let none = entry("*/5 * * * *", "UTC", CatchUp::None)
            .compile()
            .unwrap();
        assert_eq!(none.due(now, after), Due::Skip(at("2026-12-05T10:05:00Z")));
        // A daily tick missed by hours: caught up (latest) or skipped.
        let daily = entry("0 8 * * *", "UTC", CatchUp::Latest)
            .compile()
            .unwrap();
        assert_eq!(
            daily.due(at("2026-12-05T11:00:00Z"), at("2026-12-04T08:00:00Z")),
            Due::Fire(at("2026-12-05T08:00:00Z"))
        );
    }
}
