//! `[webhooks]`: where webhooks managed over the API may send. A tenant's
//! admin names the URL, so without care a webhook is a way to make the
//! server POST into its own network (its loopback, the cloud metadata
//! service at 169.254.169.254, private ranges). Refused by default:
//! plain `http`, and any address that is loopback, private, link-local or
//! unspecified.
//!
//! The address check that counts is made on the addresses the connection
//! actually uses: [`GuardedResolver`] is the HTTP client's resolver and
//! drops forbidden addresses from every answer, so a name that resolves
//! to a public address at CreateWebhook and to 127.0.0.1 later (DNS
//! rebinding) is still refused. A URL whose host is an IP literal never
//! asks a resolver; [`TargetPolicy::check_url`] checks it before each
//! attempt. The client uses no proxy, which would connect for it.
//!
//! ```toml
//! [webhooks]
//! allow_private_targets = false
//! allow_http = false
//! give_up_after = "24h"   # an event failing this long is given up
//! disable_after = "72h"   # an API webhook failing this long is disabled
//! ```
//!
//! The configured webhooks of `[[events.webhooks]]` are the operator's
//! own and are not held to this.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use serde::Deserialize;

/// `[webhooks]`: where API webhooks may send, and how long a failing
/// stream is retried (these two apply to the configured webhooks too).
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct TargetPolicy {
    /// Allow loopback, private, link-local and unspecified addresses (a
    /// receiver on this host or network).
    pub allow_private_targets: bool,
    /// Allow plain `http://` URLs.
    pub allow_http: bool,
    /// An event still failing this long after its first failed attempt is
    /// given up, and the stream goes on with the next.
    #[serde(with = "inquest_core::duration_text")]
    pub give_up_after: Duration,
    /// An API webhook whose every attempt failed for this long is disabled.
    #[serde(with = "inquest_core::duration_text")]
    pub disable_after: Duration,
}

impl Default for TargetPolicy {
    fn default() -> Self {
        Self {
            allow_private_targets: false,
            allow_http: false,
            give_up_after: Duration::from_secs(24 * 3600),
            disable_after: Duration::from_secs(72 * 3600),
        }
    }
}

/// Why an address is not a webhook target; `None` when it may be.
pub fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            // ::ffff:127.0.0.1 reaches 127.0.0.1.
            Some(v4) => forbidden_v4(v4),
            None => forbidden_v6(v6),
        },
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_unspecified() || a == 0 {
        Some("an unspecified address")
    } else if ip.is_loopback() {
        Some("a loopback address")
    } else if ip.is_private() {
        Some("a private address")
    } else if ip.is_link_local() {
        // 169.254.169.254 is the cloud metadata service.
        Some("a link-local address (cloud metadata lives there)")
    } else if a == 100 && (64..128).contains(&b) {
        Some("a shared (carrier-grade NAT) address")
    } else if ip.is_broadcast() || ip.is_multicast() {
        Some("a broadcast or multicast address")
    } else {
        None
    }
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_unspecified() {
        Some("an unspecified address")
    } else if ip.is_loopback() {
        Some("a loopback address")
    } else if first & 0xfe00 == 0xfc00 {
        Some("a private (unique local) address")
    } else if first & 0xffc0 == 0xfe80 {
        Some("a link-local address")
    } else if ip.is_multicast() {
        Some("a multicast address")
    } else {
        None
    }
}

impl TargetPolicy {
    /// Checks what can be checked without a resolver: the URL parses, is
    /// https (or http when allowed) with a host, and an IP-literal host is
    /// an allowed address. Errors say why, for the caller to read.
    pub fn check_url(&self, url: &str) -> Result<reqwest::Url, String> {
        let parsed = reqwest::Url::parse(url).map_err(|e| format!("url is not a URL: {e}"))?;
        match parsed.scheme() {
            "https" => {}
            "http" if self.allow_http => {}
            "http" => {
                return Err(
                    "url: plain http is refused; use https ([webhooks] allow_http is off)".into(),
                );
            }
            other => return Err(format!("url: the scheme must be https, not {other:?}")),
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err("url: credentials in the URL are refused".into());
        }
        let Some(host) = parsed.host_str() else {
            return Err("url: a host is required".into());
        };
        if let Some(ip) = literal_ip(host) {
            self.check_ip(ip)?;
        }
        Ok(parsed)
    }

    /// Refuses a forbidden address unless private targets are allowed.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), String> {
        match forbidden(ip) {
            Some(why) if !self.allow_private_targets => Err(format!(
                "refused: {ip} is {why} ([webhooks] allow_private_targets is off)"
            )),
            _ => Ok(()),
        }
    }

    /// Resolves `host` and refuses it when every address it has is
    /// forbidden; a name that does not resolve passes (the resolver of
    /// each attempt checks again). For an early answer at CreateWebhook.
    pub async fn check_resolved(&self, url: &reqwest::Url) -> Result<(), String> {
        let Some(host) = url.host_str().filter(|h| literal_ip(h).is_none()) else {
            return Ok(());
        };
        if self.allow_private_targets {
            return Ok(());
        }
        let lookup = tokio::net::lookup_host((host, url.port_or_known_default().unwrap_or(443)));
        let Ok(Ok(addrs)) = tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await else {
            return Ok(());
        };
        let addrs: Vec<SocketAddr> = addrs.collect();
        self.keep_allowed(host, addrs).map(drop)
    }

    /// The addresses of `host` that may be connected to; an error naming
    /// why when none is left.
    fn keep_allowed(&self, host: &str, addrs: Vec<SocketAddr>) -> Result<Vec<SocketAddr>, String> {
        if self.allow_private_targets {
            return Ok(addrs);
        }
        let mut refused = None;
        let kept: Vec<SocketAddr> = addrs
            .into_iter()
            .filter(|a| match forbidden(a.ip()) {
                Some(why) => {
                    refused.get_or_insert((a.ip(), why));
                    false
                }
                None => true,
            })
            .collect();
        match (kept.is_empty(), refused) {
            (true, Some((ip, why))) => Err(format!(
                "refused: {host} resolves to {ip}, {why} ([webhooks] allow_private_targets is off)"
            )),
            (true, None) => Err(format!("{host} resolves to no address")),
            (false, _) => Ok(kept),
        }
    }

    /// The HTTP client for API webhooks: this policy's resolver, no
    /// proxy, no redirect, `timeout` per attempt.
    pub fn client(&self, timeout: std::time::Duration) -> Result<reqwest::Client, String> {
        crate::sender::install_tls_provider();
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(std::sync::Arc::new(GuardedResolver { policy: *self }))
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| {
                format!(
                    "cannot build the webhook HTTP client: {}",
                    inquest_core::error_chain(&e)
                )
            })
    }
}

/// The address a URL's host names literally (`[..]` around IPv6).
fn literal_ip(host: &str) -> Option<IpAddr> {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// How long a name may take to resolve.
const RESOLVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The system resolver, with every forbidden address taken out of its
/// answers: what is left is all the client may connect to.
struct GuardedResolver {
    policy: TargetPolicy,
}

/// A resolver's refusal, shown in the attempt's error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Refused(String);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let lookup = tokio::net::lookup_host((host.as_str(), 0));
            let addrs: Vec<SocketAddr> = tokio::time::timeout(RESOLVE_TIMEOUT, lookup)
                .await
                .map_err(|_| Refused(format!("resolving {host} timed out")))??
                .collect();
            let kept = policy.keep_allowed(&host, addrs).map_err(Refused)?;
            let addrs: reqwest::dns::Addrs = Box::new(kept.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_ranges_are_named() {
        for ip in [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(forbidden(ip).is_some(), "{ip} passed");
        }
        for ip in ["1.1.1.1", "172.32.0.1", "2606:4700::1111", "8.8.8.8"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(forbidden(ip).is_none(), "{ip} refused");
        }
    }

    #[test]
    fn urls_are_checked_by_scheme_and_literal_address() {
        let strict = TargetPolicy::default();
        assert!(strict.check_url("https://hooks.example.com/x").is_ok());
        assert!(strict.check_url("http://hooks.example.com/x").is_err());
        assert!(strict.check_url("ftp://hooks.example.com/x").is_err());
        assert!(strict.check_url("https://127.0.0.1/").is_err());
        assert!(strict.check_url("https://[::1]/").is_err());
        assert!(strict.check_url("https://169.254.169.254/").is_err());
        assert!(strict.check_url("https://u:p@hooks.example.com/").is_err());
        let open = TargetPolicy {
            allow_private_targets: true,
            allow_http: true,
            ..TargetPolicy::default()
        };
        assert!(open.check_url("http://127.0.0.1:9/").is_ok());
    }

    #[test]
    fn a_resolved_answer_keeps_only_allowed_addresses() {
        let strict = TargetPolicy::default();
        let a = |s: &str| -> SocketAddr { s.parse().unwrap() };
        let kept = strict
            .keep_allowed("x", vec![a("127.0.0.1:0"), a("1.1.1.1:0")])
            .unwrap();
        assert_eq!(kept, vec![a("1.1.1.1:0")]);
        let err = strict
            .keep_allowed("rebound.example", vec![a("127.0.0.1:0")])
            .unwrap_err();
        assert!(
            err.contains("rebound.example resolves to 127.0.0.1"),
            "{err}"
        );
    }
}
