//! The SSRF guard: a webhook may only reach the public internet. A target whose host is,
//! or resolves to, a loopback, private, link-local, shared, documentation, multicast or
//! otherwise non-global address is refused, IPv4-mapped and other IPv6 forms of such
//! addresses included, unless private targets are allowed
//! (`CLAIMS_WEBHOOK_ALLOW_PRIVATE=true`). The check runs on the addresses the HTTP
//! client will actually connect to (it is the client's resolver), so a name that
//! resolves differently later (DNS rebinding) is caught too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::Url;

/// Checks a subscription's URL: absolute, http or https, with a host, without
/// credentials, at most 2048 characters; an IP-literal host must be global unless
/// `allow_private`. Answers the reason when refused.
pub fn check_url(raw: &str, allow_private: bool) -> Result<Url, String> {
    if raw.len() > 2048 {
        return Err("must be at most 2048 characters".into());
    }
    let url = Url::parse(raw).map_err(|e| format!("must be an absolute URL ({e})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("must be an http or https URL".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry credentials; deliveries are signed with the secret".into());
    }
    let Some(host) = url.host() else {
        return Err("must name a host".into());
    };
    if !allow_private {
        let literal = match host {
            url::Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
            url::Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
            url::Host::Domain(d)
                if d.eq_ignore_ascii_case("localhost") || d.ends_with(".localhost") =>
            {
                return Err("must not target a private or loopback address".into())
            }
            url::Host::Domain(_) => None,
        };
        if literal.is_some_and(|ip| !is_global(ip)) {
            return Err("must not target a private or loopback address".into());
        }
    }
    Ok(url)
}

/// Whether `ip` is a globally routable unicast address.
pub fn is_global(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_global_v4(v4),
        IpAddr::V6(v6) => is_global_v6(v6),
    }
}

fn is_global_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0                                  // "this network"
        || (a == 100 && (64..128).contains(&b))    // shared address space (CGNAT)
        || (a == 192 && b == 0 && c == 0)          // IETF protocol assignments
        || (a == 198 && (18..20).contains(&b))     // benchmarking
        || a >= 240) // reserved
}

fn is_global_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = embedded_v4(ip) {
        return is_global_v4(v4);
    }
    let s = ip.segments();
    // Only 2000::/3 is global unicast; within it, documentation and ORCHID-style ranges
    // are not reachable targets.
    (s[0] & 0xe000) == 0x2000
        && !(s[0] == 0x2001 && s[1] == 0x0db8)
        && !(s[0] == 0x2001 && s[1] < 0x0200)
}

/// The IPv4 address inside an IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible
/// (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) or 6to4 (`2002:ab:cd::`) address.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    let tail = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if s[..6] == [0; 6] {
        // ::1 and :: are IPv6 loopback and unspecified, not IPv4; both are refused.
        return Some(if ip.is_loopback() || ip.is_unspecified() {
            Ipv4Addr::LOCALHOST
        } else {
            tail
        });
    }
    if s[0] == 0x0064 && s[1] == 0xff9b && s[2..6] == [0; 4] {
        return Some(tail);
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

/// The HTTP client's resolver: refuses a name when any of its addresses is not global.
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow_private = self.allow_private;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if !allow_private && addrs.iter().any(|a| !is_global(a.ip())) {
                return Err(format!("{host} resolves to a private or loopback address").into());
            }
            Ok(Box::new(addrs.into_iter()) as Addrs)
        })
    }
}

/// Checks the host of an IP-literal URL at sending time: the resolver never sees those.
pub fn check_literal(url: &Url, allow_private: bool) -> Result<(), String> {
    if allow_private {
        return Ok(());
    }
    let ip = match url.host() {
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip),
        _ => return Ok(()),
    };
    if is_global(ip) {
        Ok(())
    } else {
        Err(format!("{ip} is a private or loopback address"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_global_addresses_are_refused_in_every_form() {
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "100.64.0.1",
            "192.0.0.8",
            "198.18.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "240.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "2002:c0a8:101::1",
            "::127.0.0.1",
        ] {
            assert!(!is_global(bad.parse().unwrap()), "{bad} must be refused");
        }
        for good in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "2002:808:808::1",
        ] {
            assert!(is_global(good.parse().unwrap()), "{good} is global");
        }
    }

    #[test]
    fn urls_are_checked_for_scheme_credentials_and_literal_hosts() {
        assert!(check_url("https://hooks.example.com/claims", false).is_ok());
        assert!(check_url("http://93.184.216.34:8080/x", false).is_ok());
        for bad in [
            "ftp://example.com/x",
            "file:///etc/passwd",
            "not a url",
            "/relative",
            "https://user:pw@example.com/",
            "http://127.0.0.1:9000/",
            "http://[::1]/",
            "http://[::ffff:7f00:1]/",
            "http://localhost:8080/",
            "http://10.0.0.5/",
        ] {
            assert!(check_url(bad, false).is_err(), "{bad} must be refused");
        }
        assert!(check_url("http://127.0.0.1:9000/", true).is_ok());
        assert!(check_url("ftp://example.com/", true).is_err());
    }

    #[tokio::test]
    async fn the_resolver_refuses_names_of_private_addresses() {
        let guarded = GuardedResolver {
            allow_private: false,
        };
        let name: Name = "localhost".parse().unwrap();
        assert!(guarded.resolve(name).await.is_err());
        let open = GuardedResolver {
            allow_private: true,
        };
        let name: Name = "localhost".parse().unwrap();
        assert!(open.resolve(name).await.is_ok());
    }
}
