#include "shared/sha256.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <catch2/catch.hpp>
#include <random>

using namespace gleaner;

TEST_CASE("SHA-256 matches the FIPS 180-4 vectors", "[sha256]") {
  CHECK(Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST_CASE("SHA-256 and HMAC agree with OpenSSL on random inputs and chunkings", "[sha256]") {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    std::string data(rng() % 300, '\0');
    for (char& c : data) c = char(rng());
    std::string key(rng() % 100, '\0');
    for (char& c : key) c = char(rng());

    unsigned char ref[32];
    unsigned int len = 0;
    EVP_Digest(data.data(), data.size(), ref, &len, EVP_sha256(), nullptr);
    Sha256 h;
    size_t pos = 0;
    while (pos < data.size()) {
      size_t n = std::min<size_t>(rng() % 70, data.size() - pos);
      h.Update(data.data() + pos, n);
      pos += n;
    }
    CHECK(HexEncode(h.Finish()) == HexEncode(ref, 32));

    HMAC(EVP_sha256(), key.data(), int(key.size()),
         reinterpret_cast<const unsigned char*>(data.data()), data.size(), ref, &len);
    CHECK(HexEncode(HmacSha256(key, data)) == HexEncode(ref, 32));
  }
}

TEST_CASE("hex helpers", "[sha256]") {
  std::string out;
  CHECK(HexDecode("00ff10", &out));
  CHECK(out == std::string("\x00\xff\x10", 3));
  CHECK_FALSE(HexDecode("0", &out));
  CHECK_FALSE(HexDecode("zz", &out));
  CHECK(IsSha256Hex(Sha256Hex("x")));
  CHECK_FALSE(IsSha256Hex("ABC"));
  CHECK(ConstantTimeEquals("abc", "abc"));
  CHECK_FALSE(ConstantTimeEquals("abc", "abd"));
  CHECK_FALSE(ConstantTimeEquals("abc", "ab"));
}
