//! Addresses a grant of names never reaches: those that lead into this machine, its
//! private networks or a cloud's metadata service rather than to a public host.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why `address` is special (refused unless a grant names it itself), or `None` for a
/// public address. IPv6 addresses that carry an IPv4 one (mapped, NAT64, 6to4) are
/// judged by it.
pub fn special(address: IpAddr) -> Option<&'static str> {
    match address {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => special_v6(v6),
    }
}

fn special_v4(a: Ipv4Addr) -> Option<&'static str> {
    let [b0, b1, b2, _] = a.octets();
    Some(match (b0, b1, b2) {
        _ if a.is_loopback() => "loopback",
        // 169.254.169.254 (AWS, GCP, Azure, OpenStack metadata) among them.
        _ if a.is_link_local() => "link-local (cloud metadata)",
        _ if a.is_private() => "private",
        // 100.100.100.200 (Alibaba Cloud metadata) among them.
        (100, 64..=127, _) => "shared address space (carrier-grade NAT, cloud metadata)",
        (0, ..) => "this network (0.0.0.0/8)",
        (192, 0, 0) => "IETF protocol assignments (192.0.0.0/24)",
        (198, 18..=19, _) => "benchmarking (198.18.0.0/15)",
        (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => "documentation",
        (224..=239, ..) => "multicast",
        (240..=255, ..) => "reserved or broadcast",
        // Azure's WireServer and IMDS relay: a public address that answers only inside
        // the cloud, with the VM's secrets.
        (168, 63, 129) if a.octets()[3] == 16 => "cloud metadata (Azure WireServer)",
        _ => return None,
    })
}

fn special_v6(a: Ipv6Addr) -> Option<&'static str> {
    if let Some(v4) = embedded_v4(a) {
        return special_v4(v4);
    }
    let first = a.segments()[0];
    Some(match first {
        _ if a.is_loopback() => "loopback",
        _ if a.is_unspecified() => "unspecified",
        _ if a.is_multicast() => "multicast",
        // fd00:ec2::254 (AWS metadata over IPv6) among them.
        _ if first & 0xfe00 == 0xfc00 => "unique local (private, cloud metadata)",
        _ if first & 0xffc0 == 0xfe80 => "link-local",
        _ if first & 0xffc0 == 0xfec0 => "site-local (deprecated, private)",
        0x2001 if a.segments()[1] == 0x0db8 => "documentation",
        // Teredo: the IPv4 server and (obfuscated) client it tunnels to are not judged.
        0x2001 if a.segments()[1] == 0 => "Teredo (a tunnel to an IPv4 address)",
        0x0100 if a.segments()[1..4] == [0, 0, 0] => "discard-only (100::/64)",
        _ => return None,
    })
}

/// The IPv4 address an IPv6 one stands for: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-translated
/// (`::ffff:0:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`, and
/// the local-use `64:ff9b:1::/48` of RFC 8215, which translates to private networks) or
/// 6to4 (`2002:AABB:CCDD::`).
fn embedded_v4(a: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = a.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, ..] => Some(low),
        [0, 0, 0, 0, 0, 0, ..] if !a.is_loopback() && !a.is_unspecified() => Some(low),
        [0, 0, 0, 0, 0xffff, 0, ..] => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0, ..] | [0x64, 0xff9b, 1, ..] => Some(low),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

/// Whether `address` is one of this machine's own (any interface's): a service listening
/// on a public interface of the host is the host, not a remote server. Read at each
/// request (the interfaces change); unknown when they cannot be listed, which refuses.
pub fn is_own(address: IpAddr) -> bool {
    // The IPv4 address an IPv6 one carries (NAT64, 6to4…) leads where it does.
    let address = match address {
        IpAddr::V6(v6) => embedded_v4(v6).map_or(address, IpAddr::V4),
        IpAddr::V4(_) => address,
    };
    match if_addrs::get_if_addrs() {
        Ok(interfaces) => interfaces.iter().any(|i| i.ip().to_canonical() == address),
        Err(e) => {
            tracing::warn!(error = %e, "cannot list this host's addresses: refusing as if own");
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn says(address: &str) -> Option<&'static str> {
        special(address.parse().unwrap())
    }

    #[test]
    fn loopback_private_link_local_and_metadata_are_special() {
        for address in [
            "127.0.0.1",
            "127.8.9.10",
            "10.0.0.5",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "0.0.0.0",
            "168.63.129.16",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00:ec2::254",
            "fc00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::a9fe:a9fe",
            "::ffff:0:7f00:1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2002:7f00:1::",
            "::7f00:1",
            "ff02::1",
        ] {
            assert!(says(address).is_some(), "{address} should be special");
        }
    }

    #[test]
    fn public_addresses_are_not() {
        for address in [
            "93.184.215.14",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "168.63.129.17",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            assert_eq!(says(address), None, "{address}");
        }
    }

    #[test]
    fn loopback_is_this_hosts_own() {
        assert!(is_own("127.0.0.1".parse().unwrap()));
        assert!(!is_own("93.184.215.14".parse().unwrap()));
    }
}
