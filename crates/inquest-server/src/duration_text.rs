//! Durations written as text: `"250ms"`, `"2s"`, `"5m"`, `"1h"`.

use std::time::Duration;

use serde::{Deserialize, Deserializer};

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    parse(&text).map_err(serde::de::Error::custom)
}

pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("duration {text:?} needs a unit (ms, s, m, h)"))?;
    let (num, unit) = text.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("duration {text:?} must start with a whole number"))?;
    match unit.trim() {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        other => Err(format!("unknown duration unit {other:?} (use ms, s, m, h)")),
    }
}

/// An optional duration (`#[serde(default, with = "duration_text::option")]`).
pub mod option {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let text = String::deserialize(d)?;
        super::parse(&text)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }
}
