//! `[http] allowed_hosts`: which names a server without authentication
//! answers to.
//!
//! A loopback server in `[auth] mode = "none"` trusts whoever can reach
//! it, which is meant to be the operator. A web page in the operator's
//! browser can reach it too, by DNS rebinding: its own name resolved to
//! 127.0.0.1, so the browser sends `Host: rebind.attacker.example` (and a
//! matching `Origin`). So such a server answers only requests whose host
//! (`:authority` or `Host`) is a loopback name — `127.0.0.1`, `::1`,
//! `localhost`, any port — or one listed in `allowed_hosts`, and whose
//! `Origin`, when there is one (gRPC-Web from a page), names such a host
//! too. A server with authentication, or one on a non-loopback address
//! (`--insecure-no-auth`, where anyone can reach it directly), does not
//! check.

use serde::Deserialize;
use tonic::codegen::http;

/// `[http]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpSection {
    /// More host names (without port) a loopback server without
    /// authentication answers to, e.g. a name in /etc/hosts for 127.0.0.1.
    pub allowed_hosts: Vec<String>,
}

/// The names a request may use.
#[derive(Debug, Clone)]
pub struct AllowedHosts {
    extra: Vec<String>,
}

impl AllowedHosts {
    pub fn new(section: &HttpSection) -> Self {
        Self {
            extra: section
                .allowed_hosts
                .iter()
                .map(|h| h.trim().to_ascii_lowercase())
                .collect(),
        }
    }

    /// Why `request` may not be answered, if it may not.
    pub fn refuse<B>(&self, request: &http::Request<B>) -> Option<String> {
        let authority = request
            .uri()
            .authority()
            .map(|a| a.as_str().to_owned())
            .or_else(|| header(request, http::header::HOST));
        let Some(authority) = authority else {
            return Some("the request names no host".into());
        };
        if !self.allows(host_of(&authority)) {
            return Some(format!(
                "this server runs without authentication and answers only to loopback names; \
                 host {} is not one (list it in [http] allowed_hosts)",
                crate::reason::excerpt(&authority)
            ));
        }
        if let Some(origin) = header(request, http::header::ORIGIN) {
            let host = origin
                .split_once("://")
                .map(|(_, rest)| rest)
                .unwrap_or(origin.as_str());
            if !self.allows(host_of(host)) {
                return Some(format!(
                    "this server runs without authentication and answers only to pages it \
                     serves; origin {} is another site",
                    crate::reason::excerpt(&origin)
                ));
            }
        }
        None
    }

    fn allows(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        matches!(host.as_str(), "127.0.0.1" | "::1" | "localhost")
            || host
                .parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| ip.is_loopback())
            || self.extra.contains(&host)
    }
}

fn header<B>(request: &http::Request<B>, name: http::header::HeaderName) -> Option<String> {
    request
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// `host[:port]` or `[v6][:port]` → the host, brackets removed.
fn host_of(authority: &str) -> &str {
    let authority = authority.trim_end_matches('/');
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(host, _)| host);
    }
    authority
        .rsplit_once(':')
        .map_or(authority, |(host, port)| {
            if port.chars().all(|c| c.is_ascii_digit()) {
                host
            } else {
                authority
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(authority: &str, host: Option<&str>, origin: Option<&str>) -> http::Request<()> {
        let mut r = http::Request::builder().uri(format!(
            "http://{authority}/inquest.v1.Investigations/GetSession"
        ));
        if let Some(h) = host {
            r = r.header(http::header::HOST, h);
        }
        if let Some(o) = origin {
            r = r.header(http::header::ORIGIN, o);
        }
        r.body(()).unwrap()
    }

    #[test]
    fn loopback_names_with_any_port_are_answered() {
        let hosts = AllowedHosts::new(&HttpSection::default());
        for authority in [
            "127.0.0.1:50051",
            "localhost:1",
            "[::1]:50051",
            "LOCALHOST",
            "127.0.0.2:9",
        ] {
            assert_eq!(
                hosts.refuse(&request(authority, None, None)),
                None,
                "{authority}"
            );
        }
        let page = request("127.0.0.1:50051", None, Some("http://127.0.0.1:50051"));
        assert_eq!(hosts.refuse(&page), None);
    }

    #[test]
    fn a_rebound_name_or_a_foreign_origin_is_refused() {
        let hosts = AllowedHosts::new(&HttpSection::default());
        assert!(
            hosts
                .refuse(&request("rebind.attacker.example:50051", None, None))
                .is_some()
        );
        assert!(
            hosts
                .refuse(&request("127.0.0.1.attacker.example", None, None))
                .is_some()
        );
        let foreign = request(
            "127.0.0.1:50051",
            None,
            Some("http://rebind.attacker.example:50051"),
        );
        assert!(hosts.refuse(&foreign).is_some());
    }

    #[test]
    fn allowed_hosts_extend_the_list() {
        let hosts = AllowedHosts::new(&HttpSection {
            allowed_hosts: vec!["Inquest.Internal".into()],
        });
        assert_eq!(
            hosts.refuse(&request("inquest.internal:50051", None, None)),
            None
        );
        assert!(
            hosts
                .refuse(&request("other.internal:50051", None, None))
                .is_some()
        );
    }
}
