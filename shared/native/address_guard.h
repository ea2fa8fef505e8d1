// Which network addresses a node may fetch a remote file from (docs/agent.md "What the agent
// fetches"): a developer names model files by URL, and the node must not become a probe of its
// own network. CurlHttpClient checks the address of every connection it opens for a call marked
// public_only (curl_http.h) with AddressAllowed, after DNS and before any byte is sent, so DNS
// rebinding cannot slip a private address past a check made earlier.
//
// Classes (IPv4; IPv6 forms that embed an IPv4 address — mapped ::ffff:a.b.c.d, translated
// ::ffff:0:a.b.c.d, NAT64 64:ff9b::/96, 6to4 2002::/16 — are classified by that address):
//   loopback     127/8, ::1
//   private      10/8, 172.16/12, 192.168/16, 100.64/10 (CGNAT), fc00::/7 (unique local),
//                fec0::/10 (old site-local)
//   link-local   169.254/16 (the 169.254.169.254 metadata service included), fe80::/10
//   multicast    224/4, ff00::/8
//   unspecified  0/8, ::
//   reserved     240/4 (255.255.255.255 included), documentation and benchmark ranges
//                (192.0.2/24, 198.51.100/24, 203.0.113/24, 198.18/15, 2001:db8::/32),
//                192.0.0/24, 192.88.99/24, ::/96 (IPv4-compatible), 100::/64, Teredo
//                2001::/32, 64:ff9b:1::/48, and any family other than IPv4 and IPv6
//   public       everything else
// Pure functions; thread-safe; no errors.
#pragma once

#include <cstdint>
#include <string>

struct sockaddr;

namespace gleaner::net {

enum class AddressClass {
  kPublic,
  kLoopback,
  kPrivate,
  kLinkLocal,
  kMulticast,
  kUnspecified,
  kReserved,
};

AddressClass ClassifyIPv4(uint32_t address);  // host byte order: 127.0.0.1 = 0x7f000001
AddressClass ClassifyIPv6(const uint8_t bytes[16]);
AddressClass ClassifyAddress(const struct sockaddr* address);
// Parses an IPv4 or IPv6 literal (no brackets); kReserved when it is neither.
AddressClass ClassifyAddressText(const std::string& text);
const char* AddressClassName(AddressClass c);  // "public", "loopback", "private", ...

// Whether a guarded connection may go to an address of class c. allow_private (the owner's
// --allow-private-fetch, for a mirror on the LAN) also admits loopback and private addresses;
// link-local (the metadata service), multicast, unspecified and reserved are never admitted.
bool AddressAllowed(AddressClass c, bool allow_private);

// "127.0.0.1", "::1": the address of a connection, for messages.
std::string AddressText(const struct sockaddr* address);

}  // namespace gleaner::net
