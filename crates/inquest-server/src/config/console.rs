//! `[console]`: where people open the web console from outside, so that
//! messages leaving Inquest (Slack) can link to a session.

use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleSection {
    /// The console's address as a browser opens it, e.g.
    /// `https://inquest.example.com/console/` (behind an ingress). Absent:
    /// messages carry ids, not links.
    pub public_url: Option<String>,
}

impl ConsoleSection {
    pub fn validate(&self) -> Result<(), String> {
        let Some(url) = &self.public_url else {
            return Ok(());
        };
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| format!("console.public_url: {url:?} is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
            return Err(format!(
                "console.public_url: {url:?} must be http(s) with a host"
            ));
        }
        if parsed.fragment().is_some() || parsed.query().is_some() {
            return Err(format!(
                "console.public_url: {url:?} must not have a query or a #fragment (links add their own)"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_what_cannot_be_linked_to() {
        let with = |u: &str| ConsoleSection {
            public_url: Some(u.into()),
        };
        assert!(ConsoleSection::default().validate().is_ok());
        assert!(
            with("https://inquest.example.com/console/")
                .validate()
                .is_ok()
        );
        for bad in [
            "inquest.example.com",
            "ftp://x/",
            "https://x/#/incidents",
            "https://x/?a=1",
        ] {
            assert!(with(bad).validate().is_err(), "{bad}");
        }
    }
}
