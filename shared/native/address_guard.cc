#include "shared/native/address_guard.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

namespace gleaner::net {
namespace {

// True when address lies in prefix/bits (both host byte order).
bool In4(uint32_t address, uint32_t prefix, int bits) {
  const uint32_t mask = bits == 0 ? 0 : ~uint32_t(0) << (32 - bits);
  return (address & mask) == (prefix & mask);
}

uint32_t V4At(const uint8_t* b) {
  return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | uint32_t(b[3]);
}

bool AllZero(const uint8_t* b, int n) {
  for (int i = 0; i < n; ++i) {
    if (b[i] != 0) return false;
  }
  return true;
}

}  // namespace

AddressClass ClassifyIPv4(uint32_t a) {
  if (In4(a, 0x00000000, 8)) return AddressClass::kUnspecified;  // "this network"
  if (In4(a, 0x7f000000, 8)) return AddressClass::kLoopback;
  if (In4(a, 0x0a000000, 8) || In4(a, 0xac100000, 12) || In4(a, 0xc0a80000, 16) ||
      In4(a, 0x64400000, 10)) {
    return AddressClass::kPrivate;
  }
  if (In4(a, 0xa9fe0000, 16)) return AddressClass::kLinkLocal;
  if (In4(a, 0xe0000000, 4)) return AddressClass::kMulticast;
  if (In4(a, 0xf0000000, 4) || In4(a, 0xc0000000, 24) || In4(a, 0xc0000200, 24) ||
      In4(a, 0xc0586300, 24) || In4(a, 0xc6120000, 15) || In4(a, 0xc6336400, 24) ||
      In4(a, 0xcb007100, 24)) {
    return AddressClass::kReserved;
  }
  return AddressClass::kPublic;
}

AddressClass ClassifyIPv6(const uint8_t b[16]) {
  if (AllZero(b, 16)) return AddressClass::kUnspecified;
  if (AllZero(b, 15) && b[15] == 1) return AddressClass::kLoopback;
  // ::ffff:a.b.c.d (mapped) and ::ffff:0:a.b.c.d (translated): the IPv4 address decides.
  if (AllZero(b, 10) && b[10] == 0xff && b[11] == 0xff) return ClassifyIPv4(V4At(b + 12));
  if (AllZero(b, 8) && b[8] == 0xff && b[9] == 0xff && b[10] == 0 && b[11] == 0) {
    return ClassifyIPv4(V4At(b + 12));
  }
  if (AllZero(b, 12)) return AddressClass::kReserved;  // ::a.b.c.d (IPv4-compatible, obsolete)
  // 64:ff9b::/96 (NAT64): the IPv4 address decides; 64:ff9b:1::/48 is for local use.
  static const uint8_t kNat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::memcmp(b, kNat64, 12) == 0) return ClassifyIPv4(V4At(b + 12));
  if (b[0] == 0 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b && b[4] == 0 && b[5] == 1) {
    return AddressClass::kReserved;
  }
  if (b[0] == 0x20 && b[1] == 0x02) return ClassifyIPv4(V4At(b + 2));  // 6to4
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) {
    return AddressClass::kReserved;  // documentation
  }
  if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) {
    return AddressClass::kReserved;  // Teredo: the real peer is hidden in the address
  }
  if (b[0] == 0x01 && AllZero(b + 1, 7)) return AddressClass::kReserved;  // 100::/64 discard
  if (b[0] == 0xff) return AddressClass::kMulticast;
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return AddressClass::kLinkLocal;
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return AddressClass::kPrivate;  // site-local
  if ((b[0] & 0xfe) == 0xfc) return AddressClass::kPrivate;                  // unique local
  return AddressClass::kPublic;
}

AddressClass ClassifyAddress(const struct sockaddr* address) {
  if (address == nullptr) return AddressClass::kReserved;
  if (address->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(address);
    return ClassifyIPv4(ntohl(in->sin_addr.s_addr));
  }
  if (address->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    return ClassifyIPv6(in6->sin6_addr.s6_addr);
  }
  return AddressClass::kReserved;
}

AddressClass ClassifyAddressText(const std::string& text) {
  in_addr v4;
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return ClassifyIPv4(ntohl(v4.s_addr));
  in6_addr v6;
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) return ClassifyIPv6(v6.s6_addr);
  return AddressClass::kReserved;
}

const char* AddressClassName(AddressClass c) {
  switch (c) {
    case AddressClass::kPublic:
      return "public";
    case AddressClass::kLoopback:
      return "loopback";
    case AddressClass::kPrivate:
      return "private";
    case AddressClass::kLinkLocal:
      return "link-local";
    case AddressClass::kMulticast:
      return "multicast";
    case AddressClass::kUnspecified:
      return "unspecified";
    case AddressClass::kReserved:
      break;
  }
  return "reserved";
}

bool AddressAllowed(AddressClass c, bool allow_private) {
  if (c == AddressClass::kPublic) return true;
  return allow_private && (c == AddressClass::kLoopback || c == AddressClass::kPrivate);
}

std::string AddressText(const struct sockaddr* address) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (address != nullptr && address->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, buf, sizeof buf);
  } else if (address != nullptr && address->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, buf,
              sizeof buf);
  } else {
    return "(not an IP address)";
  }
  return buf;
}

}  // namespace gleaner::net
