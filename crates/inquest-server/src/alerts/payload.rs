//! The Alertmanager webhook payload (version 4; Grafana and vmalert send
//! the same shape), parsed from JSON into checked values. Every refusal
//! names the field it is about, as a path (`alerts[3].startsAt`).
//!
//! Parsed from a `serde_json::Value` rather than derived: a derive reports
//! a wrong type as a line and column, not as the field a sender must fix.
//! serde_json's own recursion limit refuses deep JSON before this runs.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use time::{OffsetDateTime, format_description::well_known::Rfc3339};

/// Longest accepted `groupKey`: route matchers can make it long, but an
/// identifier of more than this is not one.
pub const MAX_GROUP_KEY_BYTES: usize = 4096;
/// Longest accepted alert `fingerprint` (Alertmanager's are 16 hex digits).
pub const MAX_FINGERPRINT_BYTES: usize = 256;

/// Why a payload was refused, and the field to blame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub field: String,
    pub message: String,
    /// Over a size bound (413), not malformed (400).
    pub too_large: bool,
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> Invalid {
    Invalid {
        field: field.into(),
        message: message.into(),
        too_large: false,
    }
}

/// One notification, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    pub receiver: String,
    pub group_key: String,
    pub firing: bool,
    pub external_url: String,
    pub group_labels: BTreeMap<String, String>,
    pub common_labels: BTreeMap<String, String>,
    pub common_annotations: BTreeMap<String, String>,
    pub alerts: Vec<Alert>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    pub firing: bool,
    pub fingerprint: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub starts_at: OffsetDateTime,
    /// `None` for the zero time Alertmanager sends while an alert fires.
    pub ends_at: Option<OffsetDateTime>,
    pub generator_url: String,
}

impl Notification {
    /// Parses `body`, refusing more than `max_alerts` alerts.
    pub fn parse(body: &[u8], max_alerts: usize) -> Result<Self, Invalid> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| invalid("", format!("the body is not JSON: {e}")))?;
        let Value::Object(top) = value else {
            return Err(invalid("", "the body is not a JSON object"));
        };
        let group_key = identifier(&top, "", "groupKey", MAX_GROUP_KEY_BYTES)?;
        let alerts = match top.get("alerts") {
            Some(Value::Array(a)) => a,
            Some(_) => return Err(invalid("alerts", "must be an array")),
            None => return Err(invalid("alerts", "is required")),
        };
        if alerts.is_empty() {
            return Err(invalid("alerts", "must not be empty"));
        }
        if alerts.len() > max_alerts {
            return Err(Invalid {
                field: "alerts".into(),
                message: format!(
                    "{} alerts, over alerts.max_alerts = {max_alerts} in one notification",
                    alerts.len()
                ),
                too_large: true,
            });
        }
        Ok(Self {
            receiver: optional_string(&top, "", "receiver")?,
            firing: status(&top, "")?,
            external_url: optional_string(&top, "", "externalURL")?,
            group_labels: string_map(&top, "", "groupLabels")?,
            common_labels: string_map(&top, "", "commonLabels")?,
            common_annotations: string_map(&top, "", "commonAnnotations")?,
            alerts: alerts
                .iter()
                .enumerate()
                .map(|(i, a)| Alert::parse(a, &format!("alerts[{i}].")))
                .collect::<Result<_, _>>()?,
            group_key,
        })
    }
}

impl Alert {
    fn parse(value: &Value, at: &str) -> Result<Self, Invalid> {
        let Value::Object(alert) = value else {
            return Err(invalid(at.trim_end_matches('.'), "must be an object"));
        };
        let ends_at = match alert.get("endsAt") {
            None | Some(Value::Null) => None,
            Some(_) => Some(timestamp(alert, at, "endsAt")?).filter(|t| t.year() > 1),
        };
        Ok(Self {
            firing: status(alert, at)?,
            fingerprint: identifier(alert, at, "fingerprint", MAX_FINGERPRINT_BYTES)?,
            labels: string_map(alert, at, "labels")?,
            annotations: string_map(alert, at, "annotations")?,
            starts_at: timestamp(alert, at, "startsAt")?,
            ends_at,
            generator_url: optional_string(alert, at, "generatorURL")?,
        })
    }
}

/// A required, non-empty string without NUL: an identifier is looked up
/// as sent, so NUL (which PostgreSQL text cannot hold) is refused rather
/// than encoded, as for idempotency keys.
fn identifier(
    obj: &Map<String, Value>,
    at: &str,
    key: &str,
    max: usize,
) -> Result<String, Invalid> {
    let field = format!("{at}{key}");
    let text = match obj.get(key) {
        Some(Value::String(s)) => s,
        Some(_) => return Err(invalid(field, "must be a string")),
        None => return Err(invalid(field, "is required")),
    };
    if text.is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    if text.contains('\0') {
        return Err(invalid(field, "must not contain NUL characters"));
    }
    if text.len() > max {
        return Err(invalid(
            field,
            format!("is {} bytes, over the limit of {max}", text.len()),
        ));
    }
    Ok(text.clone())
}

fn optional_string(obj: &Map<String, Value>, at: &str, key: &str) -> Result<String, Invalid> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(invalid(format!("{at}{key}"), "must be a string")),
    }
}

fn status(obj: &Map<String, Value>, at: &str) -> Result<bool, Invalid> {
    match obj.get("status") {
        Some(Value::String(s)) if s == "firing" => Ok(true),
        Some(Value::String(s)) if s == "resolved" => Ok(false),
        None => Err(invalid(format!("{at}status"), "is required")),
        Some(_) => Err(invalid(
            format!("{at}status"),
            "must be \"firing\" or \"resolved\"",
        )),
    }
}

fn string_map(
    obj: &Map<String, Value>,
    at: &str,
    key: &str,
) -> Result<BTreeMap<String, String>, Invalid> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(invalid(format!("{at}{key}.{k}"), "must be a string")),
            })
            .collect(),
        Some(_) => Err(invalid(
            format!("{at}{key}"),
            "must be an object of strings",
        )),
    }
}

fn timestamp(obj: &Map<String, Value>, at: &str, key: &str) -> Result<OffsetDateTime, Invalid> {
    let field = format!("{at}{key}");
    match obj.get(key) {
        Some(Value::String(s)) => OffsetDateTime::parse(s, &Rfc3339)
            .map_err(|e| invalid(field, format!("is not an RFC 3339 time: {e}"))),
        Some(_) => Err(invalid(field, "must be an RFC 3339 time string")),
        None => Err(invalid(field, "is required")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(extra: &str) -> String {
        format!(
            r#"{{"status":"firing","fingerprint":"abc","labels":{{"alertname":"X"}},"annotations":{{}},"startsAt":"2026-01-01T00:00:00Z","endsAt":"0001-01-01T00:00:00Z"{extra}}}"#
        )
    }

    fn body(alerts: &str) -> String {
        format!(
            r#"{{"version":"4","groupKey":"{{}}:{{alertname=\"X\"}}","status":"firing","receiver":"inquest","alerts":[{alerts}]}}"#
        )
    }

    #[test]
    fn a_webhook_payload_parses() {
        let n = Notification::parse(body(&alert("")).as_bytes(), 10).unwrap();
        assert_eq!(n.group_key, "{}:{alertname=\"X\"}");
        assert_eq!(n.alerts.len(), 1);
        assert!(n.alerts[0].firing);
        assert_eq!(n.alerts[0].ends_at, None, "the zero time is no end");
        assert_eq!(n.alerts[0].labels["alertname"], "X");
    }

    #[test]
    fn every_refusal_names_its_field() {
        let cases = [
            ("[]".to_owned(), ""),
            (r#"{"alerts":[]}"#.to_owned(), "groupKey"),
            (r#"{"groupKey":"","alerts":[]}"#.to_owned(), "groupKey"),
            (
                r#"{"groupKey":"a\u0000b","alerts":[]}"#.to_owned(),
                "groupKey",
            ),
            (r#"{"groupKey":"k","status":"firing"}"#.to_owned(), "alerts"),
            (
                r#"{"groupKey":"k","status":"firing","alerts":[]}"#.to_owned(),
                "alerts",
            ),
            (
                body(&alert(r#","startsAt":"yesterday""#)),
                "alerts[0].startsAt",
            ),
            (body(&alert(r#","labels":{"a":1}"#)), "alerts[0].labels.a"),
            (body(&alert(r#","status":"maybe""#)), "alerts[0].status"),
            (body(&alert(r#","fingerprint":7"#)), "alerts[0].fingerprint"),
            (body("1"), "alerts[0]"),
        ];
        for (text, field) in cases {
            let err = Notification::parse(text.as_bytes(), 10).unwrap_err();
            assert_eq!(err.field, field, "{text}: {err:?}");
            assert!(!err.too_large);
        }
        let many = vec![alert(""); 3].join(",");
        let err = Notification::parse(body(&many).as_bytes(), 2).unwrap_err();
        assert_eq!((err.field.as_str(), err.too_large), ("alerts", true));
    }

    #[test]
    fn deep_json_is_refused_not_overflowed() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(Notification::parse(deep.as_bytes(), 10).is_err());
    }
}
