//! Durations written as text in config files: `"250ms"`, `"2s"`, `"5m"`,
//! `"1h"`, `"90d"`. The one parser every config section uses.

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
        "m" => n
            .checked_mul(60)
            .map(Duration::from_secs)
            .ok_or_else(|| format!("duration {text:?} is too long")),
        "h" => n
            .checked_mul(3600)
            .map(Duration::from_secs)
            .ok_or_else(|| format!("duration {text:?} is too long")),
        "d" => n
            .checked_mul(86_400)
            .map(Duration::from_secs)
            .ok_or_else(|| format!("duration {text:?} is too long")),
        other => Err(format!(
            "unknown duration unit {other:?} (use ms, s, m, h, d)"
        )),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_parse_and_nonsense_is_refused() {
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse(" 2m "), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("90d"), Ok(Duration::from_secs(90 * 86_400)));
        for bad in ["", "s", "10", "10 parsecs", "-1s", "18446744073709551615h"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
