// agent/protocol/synthetic_chain.h: the synthetic kind's expected result.
#include "agent/protocol/synthetic_chain.h"

#include <catch2/catch.hpp>

using namespace gleaner;

TEST_CASE("the protocol's synthetic chain matches an independent computation", "[synthetic]") {
  // python3: s=sha256(b'7'); for k in 1..20: s=sha256(s+k.to_bytes(8,'little'))
  CHECK(SyntheticChainHex(7, 20) ==
        "9e1fd5f5e11aa23a9b1204ebb450528037b48be6097668d61d460095410feebc");
  CHECK(SyntheticChainHex(0, 0) == HexEncode(Sha256Of("0")));
  CHECK(HexEncode(SyntheticChainNext(SyntheticChainSeed(-3), 1)) == SyntheticChainHex(-3, 1));
}
