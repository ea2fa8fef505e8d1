#include "agent/protocol/synthetic_chain.h"

namespace gleaner {

Digest SyntheticChainSeed(int64_t seed) {
  return Sha256Of(std::to_string(seed));
}

Digest SyntheticChainNext(const Digest& prev, int64_t k) {
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = uint8_t(uint64_t(k) >> (8 * i));
  Sha256 h;
  h.Update(prev.data(), prev.size());
  h.Update(le, sizeof le);
  return h.Finish();
}

std::string SyntheticChainHex(int64_t seed, int64_t steps) {
  Digest s = SyntheticChainSeed(seed);
  for (int64_t k = 1; k <= steps; ++k) s = SyntheticChainNext(s, k);
  return HexEncode(s);
}

}  // namespace gleaner
