//! `[alerts]`: the Alertmanager webhook's bounds and its triggers.
//!
//! ```toml
//! [alerts]
//! max_body_bytes = 1048576   # a larger notification is refused 413
//! max_alerts = 1000          # alerts in one notification; more is 413
//! max_started_per_hour = 60  # investigations a tenant's alerts start per hour
//!
//! [[alerts.triggers]]        # the first that matches starts a session
//! match = { severity = "critical" }   # every label equal, on a firing alert
//! match_re = { instance = "db-.*" }   # and every regex matching the whole value
//! prompt = "Investigate {{label.alertname}} on {{label.instance}}: {{annotation.summary}}\n{{alerts}}"
//! skills = ["postgres"]      # the [[skills]] its session loads; default: every one
//! ```
//!
//! The session runs under the limits of the tenant whose token sent the
//! notification (`[tenants]`), as any session that tenant starts.
//!
//! A prompt is a plain template, not a template language: each
//! `{{label.NAME}}` and `{{annotation.NAME}}` is the group's common label or
//! annotation (else the first firing alert's, else empty), `{{external_url}}`
//! is the sender's link, and `{{alerts}}` is every alert's status, labels,
//! annotations and link, between `<alerts>` and `</alerts>`. Alert text is
//! the sender's, untrusted: every value is cut at a bound with the usual
//! marker. Anything else between `{{` and `}}` is refused at startup.

use std::collections::BTreeMap;

use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct AlertsSection {
    /// Largest accepted notification body, in bytes (413 above it).
    pub max_body_bytes: usize,
    /// Most alerts accepted in one notification (413 above it).
    pub max_alerts: usize,
    /// Investigations a tenant's alerts may start per hour (a storm's
    /// cap); past it incidents are still recorded, without a session, and
    /// say why. `[tenants.overrides.<tenant>] alerts_max_started_per_hour`
    /// sets one tenant's own.
    pub max_started_per_hour: u32,
    /// Tried in order; the first that matches a group starts its session.
    pub triggers: Vec<Trigger>,
}

impl Default for AlertsSection {
    fn default() -> Self {
        Self {
            max_body_bytes: 1024 * 1024,
            max_alerts: 1000,
            max_started_per_hour: 60,
            triggers: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    /// Label name → value; a firing alert with every one of them equal
    /// (and every `match_re` matching) matches.
    #[serde(rename = "match", default)]
    pub matches: BTreeMap<String, String>,
    /// Label name → regular expression, anchored at both ends (as
    /// Alertmanager's own `match_re`); an absent label is the empty value.
    #[serde(default)]
    pub match_re: BTreeMap<String, String>,
    /// The session's opening message (see the module docs).
    pub prompt: String,
    /// When every alert of the group resolves: `notice` (the default) or
    /// `follow_up`, which also sends the session a message saying so, so
    /// a burst confirms the recovery.
    #[serde(default)]
    pub on_resolved: OnResolved,
    /// The `[[skills]]` (by name) its session loads, in every burst, on
    /// any replica; left out, every configured skill, as for a session a
    /// person starts. A name no `[[skills]]` entry has is refused at
    /// startup.
    #[serde(default)]
    pub skills: Option<Vec<String>>,
}

/// What a trigger's session gets when its group resolves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnResolved {
    /// A notice and `resolved_at`; no burst.
    #[default]
    Notice,
    /// The notice, and a follow-up message that opens a burst.
    FollowUp,
}

/// A part of a prompt template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part<'a> {
    Text(&'a str),
    Label(&'a str),
    Annotation(&'a str),
    ExternalUrl,
    Alerts,
}

/// The parts of `template`, or what is wrong with it.
pub fn parse_template(template: &str) -> Result<Vec<Part<'_>>, String> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        if open > 0 {
            parts.push(Part::Text(&rest[..open]));
        }
        let after = &rest[open + 2..];
        let close = after.find("}}").ok_or_else(|| {
            format!(
                "an unclosed {{{{ at byte {}",
                template.len() - rest.len() + open
            )
        })?;
        let name = after[..close].trim();
        parts.push(match name {
            "alerts" => Part::Alerts,
            "external_url" => Part::ExternalUrl,
            _ => match name.split_once('.') {
                Some(("label", n)) if !n.is_empty() => Part::Label(n),
                Some(("annotation", n)) if !n.is_empty() => Part::Annotation(n),
                _ => {
                    return Err(format!(
                        "unknown placeholder {{{{{name}}}}}: use label.NAME, annotation.NAME, \
                         external_url or alerts"
                    ));
                }
            },
        });
        rest = &after[close + 2..];
    }
    if !rest.is_empty() {
        parts.push(Part::Text(rest));
    }
    Ok(parts)
}

impl AlertsSection {
    pub fn validate(&self) -> Result<(), String> {
        if !(1..=64 * 1024 * 1024).contains(&self.max_body_bytes) {
            return Err("alerts.max_body_bytes must be between 1 and 67108864".into());
        }
        if !(1..=100_000).contains(&self.max_alerts) {
            return Err("alerts.max_alerts must be between 1 and 100000".into());
        }
        if self.max_started_per_hour == 0 {
            return Err(
                "alerts.max_started_per_hour must be > 0 (leave out [[alerts.triggers]] to start none)"
                    .into(),
            );
        }
        for (i, t) in self.triggers.iter().enumerate() {
            if t.matches.is_empty() && t.match_re.is_empty() {
                return Err(format!(
                    "alerts.triggers[{i}].match must name at least one label (or match_re one \
                     regex): a trigger for every alert would start a session for each group"
                ));
            }
            for (label, re) in &t.match_re {
                anchored(re).map_err(|e| format!("alerts.triggers[{i}].match_re.{label}: {e}"))?;
            }
            if t.prompt.trim().is_empty() {
                return Err(format!("alerts.triggers[{i}].prompt must not be empty"));
            }
            parse_template(&t.prompt).map_err(|e| format!("alerts.triggers[{i}].prompt: {e}"))?;
        }
        Ok(())
    }
}

/// `re` matching a whole value, as Alertmanager's `match_re` does.
fn anchored(re: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(&format!("^(?:{re})$"))
        // A trigger's regex is the operator's; the bound only keeps a
        // mistyped one from taking a large part of memory at startup.
        .size_limit(1 << 20)
        .build()
}

/// A trigger with its regexes compiled, made from a validated section.
#[derive(Debug, Clone)]
pub struct Matcher {
    pub trigger: Trigger,
    regexes: Vec<(String, regex::Regex)>,
}

impl Matcher {
    /// Whether `labels` (a firing alert's) satisfy every `match` and
    /// `match_re` of the trigger.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.trigger
            .matches
            .iter()
            .all(|(k, want)| labels.get(k).is_some_and(|v| v == want))
            && self
                .regexes
                .iter()
                .all(|(k, re)| re.is_match(labels.get(k).map_or("", String::as_str)))
    }
}

impl AlertsSection {
    /// The triggers, compiled, in order. A regex that does not compile
    /// (never, once `validate` passed) leaves its trigger out, said in
    /// the log.
    pub fn matchers(&self) -> Vec<Matcher> {
        self.triggers
            .iter()
            .filter_map(|t| {
                let regexes = t
                    .match_re
                    .iter()
                    .map(|(k, re)| anchored(re).map(|re| (k.clone(), re)))
                    .collect::<Result<Vec<_>, _>>();
                match regexes {
                    Ok(regexes) => Some(Matcher {
                        trigger: t.clone(),
                        regexes,
                    }),
                    Err(e) => {
                        tracing::error!(error = %e, "an alert trigger's match_re does not compile; trigger left out");
                        None
                    }
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_is_read_and_validated_by_name() {
        let s: AlertsSection = toml::from_str(
            "max_alerts = 5\n[[triggers]]\nmatch = { severity = \"critical\" }\nprompt = \"look at {{label.alertname}}\"\n",
        )
        .unwrap();
        s.validate().unwrap();
        assert_eq!(s.max_alerts, 5);
        assert_eq!(s.max_body_bytes, 1024 * 1024);
        assert_eq!(s.triggers[0].matches["severity"], "critical");
        for (bad, name) in [
            ("max_body_bytes = 0", "alerts.max_body_bytes"),
            ("max_alerts = 0", "alerts.max_alerts"),
            (
                "[[triggers]]\nmatch = {}\nprompt = \"p\"",
                "alerts.triggers[0].match",
            ),
            (
                "[[triggers]]\nmatch = { a = \"b\" }\nprompt = \" \"",
                "alerts.triggers[0].prompt",
            ),
            (
                "[[triggers]]\nmatch = { a = \"b\" }\nprompt = \"{{labels.a}}\"",
                "alerts.triggers[0].prompt",
            ),
            (
                "[[triggers]]\nmatch = { a = \"b\" }\nprompt = \"{{alerts\"",
                "alerts.triggers[0].prompt",
            ),
        ] {
            let s: AlertsSection = toml::from_str(bad).unwrap();
            let err = s.validate().unwrap_err();
            assert!(err.contains(name), "{bad}: {err}");
        }
        let s: AlertsSection =
            toml::from_str("[[triggers]]\nmatch_re = { instance = \"db-(\" }\nprompt = \"p\"")
                .unwrap();
        let err = s.validate().unwrap_err();
        assert!(
            err.contains("alerts.triggers[0].match_re.instance"),
            "{err}"
        );
        assert!(toml::from_str::<AlertsSection>("bogus = 1").is_err());
        assert!(
            toml::from_str::<AlertsSection>("[[triggers]]\nprompt = \"p\"\nregex = {}").is_err()
        );
    }

    #[test]
    fn match_re_matches_whole_values_and_match_equal_ones() {
        let s: AlertsSection = toml::from_str(
            "[[triggers]]\nmatch = { severity = \"critical\" }\nmatch_re = { instance = \"db-[0-9]+\" }\nprompt = \"p\"\n\
             [[triggers]]\nmatch_re = { team = \"|ops\" }\nprompt = \"q\"",
        )
        .unwrap();
        s.validate().unwrap();
        let m = s.matchers();
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(m[0].matches(&labels(&[("severity", "critical"), ("instance", "db-12")])));
        assert!(!m[0].matches(&labels(&[("severity", "critical"), ("instance", "xdb-12")])));
        assert!(!m[0].matches(&labels(&[("severity", "critical"), ("instance", "db-12x")])));
        assert!(!m[0].matches(&labels(&[("severity", "warning"), ("instance", "db-1")])));
        assert!(
            m[1].matches(&labels(&[])),
            "an absent label is the empty value"
        );
        assert!(m[1].matches(&labels(&[("team", "ops")])));
        assert!(!m[1].matches(&labels(&[("team", "dev")])));
    }

    #[test]
    fn a_template_is_text_and_known_placeholders() {
        assert_eq!(
            parse_template("a {{ label.x }}b{{annotation.s}}{{alerts}}{{external_url}}").unwrap(),
            vec![
                Part::Text("a "),
                Part::Label("x"),
                Part::Text("b"),
                Part::Annotation("s"),
                Part::Alerts,
                Part::ExternalUrl
            ]
        );
    }
}
