//! The SSRF guard of `http_request`: which hosts and addresses it may reach.
//!
//! A URL is vetted before every hop (the first request and each redirect):
//! only http/https, and every address its host resolves to must be public
//! unless `host:port` is in the operator's allow list. The caller then pins
//! the connection to exactly the vetted addresses, so a second DNS answer
//! (rebinding) cannot send the request elsewhere.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use url::{Host, Url};

/// Environment variable holding the allow list (comma-separated `host:port`).
pub const ALLOW_ENV: &str = "BATON_HTTP_ALLOW";

/// A host as the URL parser canonicalises it, so that `2130706433`,
/// `127.1` and `127.0.0.1` are the same entry.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum AllowedHost {
    Ip(IpAddr),
    Name(String),
}

impl AllowedHost {
    fn from_url_host(host: &Host<&str>) -> Self {
        match host {
            Host::Domain(name) => {
                AllowedHost::Name(name.trim_end_matches('.').to_ascii_lowercase())
            }
            Host::Ipv4(ip) => AllowedHost::Ip(IpAddr::V4(*ip)),
            Host::Ipv6(ip) => AllowedHost::Ip(IpAddr::V6(*ip)),
        }
    }
}

/// `host:port` pairs that `http_request` may reach although they resolve to
/// private, loopback or otherwise non-public addresses (`BATON_HTTP_ALLOW`).
///
/// Entries match the URL's host exactly as written (after canonicalisation):
/// allowing `127.0.0.1:8080` does not allow `localhost:8080`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowList {
    entries: BTreeSet<(AllowedHost, u16)>,
}

/// A malformed `BATON_HTTP_ALLOW` entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllowListError {
    #[error("allow-list entry `{0}` is not host:port")]
    MissingPort(String),
    #[error("allow-list entry `{0}` has an invalid port")]
    InvalidPort(String),
    #[error("allow-list entry `{0}` has an invalid host")]
    InvalidHost(String),
}

impl AllowList {
    /// An empty list: only public addresses are reachable.
    pub fn new() -> Self {
        AllowList::default()
    }

    /// Parses a comma-separated list of `host:port` entries, e.g.
    /// `localhost:8080, 10.0.0.5:443, [::1]:9000`. Blank entries are ignored.
    pub fn parse(list: &str) -> Result<Self, AllowListError> {
        let mut entries = BTreeSet::new();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (host, port) = split_host_port(entry)?;
            let host =
                Host::parse(host).map_err(|_| AllowListError::InvalidHost(entry.to_owned()))?;
            let host = match host {
                Host::Domain(ref name) => AllowedHost::from_url_host(&Host::Domain(name.as_str())),
                Host::Ipv4(ip) => AllowedHost::Ip(IpAddr::V4(ip)),
                Host::Ipv6(ip) => AllowedHost::Ip(IpAddr::V6(ip)),
            };
            if matches!(&host, AllowedHost::Name(name) if name.is_empty()) {
                return Err(AllowListError::InvalidHost(entry.to_owned()));
            }
            entries.insert((host, port));
        }
        Ok(AllowList { entries })
    }

    /// Adds one pair (for code that builds the list without a string).
    pub fn insert(&mut self, host: &str, port: u16) -> Result<(), AllowListError> {
        let parsed = AllowList::parse(&format_host_port(host, port))?;
        self.entries.extend(parsed.entries);
        Ok(())
    }

    /// Whether the URL's `host:port` is listed.
    pub fn allows_url(&self, url: &Url) -> bool {
        match (url.host(), url.port_or_known_default()) {
            (Some(host), Some(port)) => self
                .entries
                .contains(&(AllowedHost::from_url_host(&host), port)),
            _ => false,
        }
    }

    /// Whether nothing is listed.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of listed pairs.
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

fn format_host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn split_host_port(entry: &str) -> Result<(&str, u16), AllowListError> {
    let (host, port) = if entry.starts_with('[') {
        // [v6]:port — keep the brackets, Host::parse wants them.
        let close = entry
            .find(']')
            .ok_or_else(|| AllowListError::InvalidHost(entry.to_owned()))?;
        let port = entry[close + 1..]
            .strip_prefix(':')
            .ok_or_else(|| AllowListError::MissingPort(entry.to_owned()))?;
        (&entry[..=close], port)
    } else {
        let (host, port) = entry
            .rsplit_once(':')
            .ok_or_else(|| AllowListError::MissingPort(entry.to_owned()))?;
        if host.contains(':') {
            // A bare IPv6 address: the port is ambiguous without brackets.
            return Err(AllowListError::InvalidHost(entry.to_owned()));
        }
        (host, port)
    };
    let port: u16 = port
        .parse()
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| AllowListError::InvalidPort(entry.to_owned()))?;
    if host.is_empty() {
        return Err(AllowListError::InvalidHost(entry.to_owned()));
    }
    Ok((host, port))
}

/// Why `ip` is not a public unicast address, or `None` if it is.
///
/// Covers unspecified, loopback, private (RFC 1918), CGNAT (100.64/10),
/// link-local (169.254/16 — cloud metadata lives there — and fe80::/10),
/// broadcast, multicast, documentation, benchmarking and reserved ranges,
/// IPv6 unique-local (fc00::/7) and everything outside 2000::/3, and the
/// IPv6 forms that carry an IPv4 address (mapped, compatible, NAT64, 6to4),
/// which are judged by the IPv4 address inside.
pub fn blocked_reason(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => v4_reason(v4),
        IpAddr::V6(v6) => v6_reason(v6),
    }
}

fn v4_reason(ip: Ipv4Addr) -> Option<&'static str> {
    const RANGES: &[([u8; 4], u32, &str)] = &[
        ([0, 0, 0, 0], 8, "unspecified (\"this network\")"),
        ([10, 0, 0, 0], 8, "private"),
        ([100, 64, 0, 0], 10, "shared (CGNAT)"),
        ([127, 0, 0, 0], 8, "loopback"),
        ([169, 254, 0, 0], 16, "link-local (cloud metadata)"),
        ([172, 16, 0, 0], 12, "private"),
        ([192, 0, 0, 0], 24, "reserved (IETF protocol assignments)"),
        ([192, 0, 2, 0], 24, "documentation"),
        ([192, 88, 99, 0], 24, "reserved (6to4 relay)"),
        ([192, 168, 0, 0], 16, "private"),
        ([198, 18, 0, 0], 15, "reserved (benchmarking)"),
        ([198, 51, 100, 0], 24, "documentation"),
        ([203, 0, 113, 0], 24, "documentation"),
        ([224, 0, 0, 0], 4, "multicast"),
        ([255, 255, 255, 255], 32, "broadcast"),
        ([240, 0, 0, 0], 4, "reserved"),
    ];
    let addr = u32::from(ip);
    RANGES.iter().find_map(|(base, bits, reason)| {
        let mask = u32::MAX << (32 - bits);
        (addr & mask == u32::from(Ipv4Addr::from(*base)) & mask).then_some(*reason)
    })
}

fn v6_reason(ip: Ipv6Addr) -> Option<&'static str> {
    let addr = u128::from(ip);
    let within = |base: u128, bits: u32| addr & (u128::MAX << (128 - bits)) == base;
    let embedded_v4 = Ipv4Addr::from((addr & 0xffff_ffff) as u32);

    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    // Forms that carry an IPv4 address are as dangerous as that address:
    // ::ffff:a.b.c.d (mapped), ::a.b.c.d (compatible), 64:ff9b::a.b.c.d (NAT64).
    if within(0xffff << 32, 96) || within(0, 96) || within(0x0064_ff9b << 96, 96) {
        return v4_reason(embedded_v4);
    }
    // 6to4 2002:a.b.c.d::/48 reaches the IPv4 address a.b.c.d.
    if within(0x2002 << 112, 16) {
        return v4_reason(Ipv4Addr::from(((addr >> 80) & 0xffff_ffff) as u32));
    }
    if !within(0x2000 << 112, 3) {
        // Outside global unicast (2000::/3).
        return Some(if within(0xfc << 120, 7) {
            "unique-local"
        } else if within(0xfe80 << 112, 10) {
            "link-local"
        } else if within(0xfec0 << 112, 10) {
            "site-local"
        } else if within(0xff << 120, 8) {
            "multicast"
        } else {
            "reserved (not global unicast)"
        });
    }
    if within(0x2001 << 112, 23) {
        return Some("reserved (IETF protocol assignments, Teredo)");
    }
    if within(0x2001_0db8 << 96, 32) || within(0x3fff << 112, 20) {
        return Some("documentation");
    }
    None
}

/// Why a URL may not be requested.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("scheme `{0}` is not allowed; only http and https")]
    Scheme(String),
    #[error("the URL has no host")]
    NoHost,
    #[error("could not resolve host `{host}`: {reason}")]
    Resolve { host: String, reason: String },
    #[error("host `{host}` resolved to no address")]
    NoAddress { host: String },
    #[error(
        "refused: `{host}` resolves to {ip}, a {reason} address; only public addresses \
         (or host:port pairs the operator listed in BATON_HTTP_ALLOW) may be requested"
    )]
    Blocked {
        host: String,
        ip: IpAddr,
        reason: &'static str,
    },
}

/// Where a vetted URL may connect: the addresses its host resolved to, all
/// checked. `domain` is set when the host is a name (IP literals need no pin).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Vetted {
    pub domain: Option<String>,
    pub addrs: Vec<SocketAddr>,
}

/// Checks scheme, resolves the host and checks every address it resolves to.
pub(crate) async fn vet(url: &Url, allow: &AllowList) -> Result<Vetted, Refusal> {
    let scheme = url.scheme();
    if scheme != "http" && scheme != "https" {
        return Err(Refusal::Scheme(scheme.to_owned()));
    }
    let host = url.host().ok_or(Refusal::NoHost)?;
    let port = url.port_or_known_default().ok_or(Refusal::NoHost)?;
    let (domain, mut addrs) = match host {
        Host::Ipv4(ip) => (None, vec![SocketAddr::new(IpAddr::V4(ip), port)]),
        Host::Ipv6(ip) => (None, vec![SocketAddr::new(IpAddr::V6(ip), port)]),
        Host::Domain(name) => {
            let resolved =
                tokio::net::lookup_host((name, port))
                    .await
                    .map_err(|e| Refusal::Resolve {
                        host: name.to_owned(),
                        reason: e.to_string(),
                    })?;
            (Some(name.to_owned()), resolved.collect::<Vec<_>>())
        }
    };
    addrs.sort();
    addrs.dedup();
    let shown_host = || url.host_str().unwrap_or_default().to_owned();
    if addrs.is_empty() {
        return Err(Refusal::NoAddress { host: shown_host() });
    }
    if !allow.allows_url(url) {
        // Any bad address refuses the host: the connector could pick any of them.
        if let Some((ip, reason)) = addrs
            .iter()
            .find_map(|a| blocked_reason(a.ip()).map(|r| (a.ip(), r)))
        {
            return Err(Refusal::Blocked {
                host: shown_host(),
                ip,
                reason,
            });
        }
    }
    Ok(Vetted { domain, addrs })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(s: &str) -> bool {
        blocked_reason(s.parse().expect("ip")).is_some()
    }

    #[test]
    fn non_public_ipv4_is_blocked() {
        for ip in [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.255.0.9",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
        ] {
            assert!(blocked(ip), "{ip} should be blocked");
        }
        assert_eq!(
            blocked_reason("255.255.255.255".parse().expect("ip")),
            Some("broadcast")
        );
        assert_eq!(
            blocked_reason("127.0.0.1".parse().expect("ip")),
            Some("loopback")
        );
    }

    #[test]
    fn public_ipv4_passes() {
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "100.128.0.1",
            "172.32.0.1",
            "11.0.0.1",
        ] {
            assert!(!blocked(ip), "{ip} should pass");
        }
    }

    #[test]
    fn non_public_ipv6_is_blocked() {
        for ip in [
            "::",
            "::1",
            "fe80::1",
            "febf::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "fec0::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "::10.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b:1::1",
            "2002:7f00:1::1",
            "2002:a9fe:a9fe::1",
            "2001:db8::1",
            "2001::1",
            "3fff::1",
            "100::1",
        ] {
            assert!(blocked(ip), "{ip} should be blocked");
        }
    }

    #[test]
    fn public_ipv6_passes() {
        for ip in [
            "2606:4700:4700::1111",
            "2a00:1450:4001::200e",
            "::ffff:8.8.8.8",
            "2002:0808:0808::1",
        ] {
            assert!(!blocked(ip), "{ip} should pass");
        }
    }

    #[test]
    fn allow_list_parses_and_canonicalises() {
        let list = AllowList::parse(" localhost:8080, 127.0.0.1:9000 ,[::1]:443,, Example.COM.:80")
            .expect("parse");
        assert_eq!(list.len(), 4);
        let ok = |u: &str| list.allows_url(&Url::parse(u).expect("url"));
        assert!(ok("http://localhost:8080/x"));
        assert!(ok("http://LOCALHOST:8080/"));
        assert!(ok("http://127.0.0.1:9000/"));
        assert!(ok("http://2130706433:9000/"), "integer form of 127.0.0.1");
        assert!(ok("https://[::1]/"), "default port 443");
        assert!(ok("http://example.com/"));
        assert!(!ok("http://localhost:8081/"));
        assert!(
            !ok("http://localhost:9000/"),
            "names and addresses are distinct entries"
        );
        assert!(!ok("http://[::1]:80/"));
    }

    #[test]
    fn allow_list_rejects_malformed_entries() {
        assert_eq!(
            AllowList::parse("localhost"),
            Err(AllowListError::MissingPort("localhost".into()))
        );
        assert!(matches!(
            AllowList::parse("localhost:0"),
            Err(AllowListError::InvalidPort(_))
        ));
        assert!(matches!(
            AllowList::parse("localhost:99999"),
            Err(AllowListError::InvalidPort(_))
        ));
        assert!(matches!(
            AllowList::parse("::1:80"),
            Err(AllowListError::InvalidHost(_))
        ));
        assert!(matches!(
            AllowList::parse(":80"),
            Err(AllowListError::InvalidHost(_))
        ));
        assert!(matches!(
            AllowList::parse("[::1]"),
            Err(AllowListError::MissingPort(_))
        ));
        assert!(matches!(
            AllowList::parse("bad host:80"),
            Err(AllowListError::InvalidHost(_))
        ));
        assert_eq!(AllowList::parse("").map(|l| l.is_empty()), Ok(true));
    }

    #[test]
    fn insert_accepts_bare_ipv6() {
        let mut list = AllowList::new();
        list.insert("::1", 8080).expect("insert");
        assert!(list.allows_url(&Url::parse("http://[::1]:8080/").expect("url")));
    }

    #[tokio::test]
    async fn vet_refuses_schemes_and_private_hosts() {
        let allow = AllowList::new();
        let refuse = |u: &'static str| {
            let allow = allow.clone();
            async move { vet(&Url::parse(u).expect("url"), &allow).await }
        };
        assert_eq!(
            refuse("file:///etc/passwd").await,
            Err(Refusal::Scheme("file".into()))
        );
        assert_eq!(
            refuse("ftp://example.com/").await,
            Err(Refusal::Scheme("ftp".into()))
        );
        assert!(matches!(
            refuse("http://localhost/").await,
            Err(Refusal::Blocked { .. })
        ));
        assert!(matches!(
            refuse("http://0x7f000001/").await,
            Err(Refusal::Blocked { .. })
        ));
        assert!(matches!(
            refuse("http://[::ffff:127.0.0.1]/").await,
            Err(Refusal::Blocked { .. })
        ));
    }

    #[tokio::test]
    async fn vet_pins_allowed_private_host() {
        let allow = AllowList::parse("127.0.0.1:8080").expect("parse");
        let url = Url::parse("http://127.0.0.1:8080/").expect("url");
        let vetted = vet(&url, &allow).await.expect("allowed");
        assert_eq!(vetted.domain, None);
        assert_eq!(vetted.addrs, vec!["127.0.0.1:8080".parse().expect("addr")]);
    }
}
