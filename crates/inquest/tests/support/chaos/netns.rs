//! A network namespace for the replica the test partitions from
//! PostgreSQL: joined to the host by a veth pair on a private /30 link
//! (host side [`HOST_IP`], namespace side [`NS_IP`]). Cutting the link
//! (`ip link set <host side> down`) leaves that replica running, tools and
//! all, while nothing it sends reaches the database or the model, and
//! nothing reaches it.
//!
//! The namespace and the pair are removed when the guard drops, on a
//! panic too. A machine where they cannot be made fails the test.

use std::{net::IpAddr, process::Command};

pub const HOST_IP: &str = "10.231.0.1";
pub const NS_IP: &str = "10.231.0.2";

pub struct Netns {
    pub name: String,
    /// The host side of the veth pair: the one cut and healed.
    pub host_if: String,
    ns_if: String,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip {}`: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`ip {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

pub fn host_ip() -> IpAddr {
    HOST_IP.parse().expect("a literal address")
}

pub fn ns_ip() -> IpAddr {
    NS_IP.parse().expect("a literal address")
}

impl Netns {
    /// Creates the namespace and the link, named after this process.
    pub fn create() -> Result<Netns, String> {
        let pid = std::process::id();
        let netns = Netns {
            name: format!("inquest-chaos-{pid}"),
            host_if: format!("iqc{pid}h"),
            ns_if: format!("iqc{pid}n"),
        };
        remove_stale_links()?;
        ip(&["netns", "add", &netns.name])?;
        // From here on the guard cleans up whatever was made.
        let host_cidr = format!("{HOST_IP}/30");
        let ns_cidr = format!("{NS_IP}/30");
        let n = netns.name.as_str();
        ip(&[
            "link",
            "add",
            &netns.host_if,
            "type",
            "veth",
            "peer",
            "name",
            &netns.ns_if,
        ])?;
        ip(&["link", "set", &netns.ns_if, "netns", n])?;
        ip(&["addr", "add", &host_cidr, "dev", &netns.host_if])?;
        ip(&["link", "set", &netns.host_if, "up"])?;
        ip(&["-n", n, "addr", "add", &ns_cidr, "dev", &netns.ns_if])?;
        ip(&["-n", n, "link", "set", &netns.ns_if, "up"])?;
        ip(&["-n", n, "link", "set", "lo", "up"])?;
        Ok(netns)
    }

    /// The partition: the link goes down, the replica keeps running.
    pub fn cut(&self) -> Result<(), String> {
        ip(&["link", "set", &self.host_if, "down"])
    }

    pub fn heal(&self) -> Result<(), String> {
        ip(&["link", "set", &self.host_if, "up"])
    }

    /// `ip netns exec <name>`: the prefix that runs a program inside.
    pub fn exec_prefix(&self) -> Vec<String> {
        vec!["netns".into(), "exec".into(), self.name.clone()]
    }
}

/// A link of an earlier run of this test that died before its guard ran
/// holds the address: removes it if the process named in it is gone, and
/// fails otherwise (another run is using it).
fn remove_stale_links() -> Result<(), String> {
    let out = Command::new("ip")
        .args(["-o", "addr", "show", "to", &format!("{HOST_IP}/32")])
        .output()
        .map_err(|e| format!("cannot run `ip addr show`: {e}"))?;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.split_whitespace().nth(1) else {
            continue;
        };
        let name = name.split('@').next().unwrap_or(name);
        let owner = name
            .strip_prefix("iqc")
            .and_then(|r| r.strip_suffix('h'))
            .and_then(|pid| pid.parse::<u32>().ok());
        match owner {
            Some(pid) if !std::path::Path::new(&format!("/proc/{pid}")).exists() => {
                ip(&["link", "del", name])?;
                let _ = ip(&["netns", "del", &format!("inquest-chaos-{pid}")]);
            }
            _ => {
                return Err(format!(
                    "{HOST_IP} is already in use on interface {name}; another chaos run \
                     (or something else) holds it"
                ));
            }
        }
    }
    Ok(())
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting one side of a veth pair deletes both.
        let _ = ip(&["link", "del", &self.host_if]);
        let _ = ip(&["netns", "del", &self.name]);
    }
}
