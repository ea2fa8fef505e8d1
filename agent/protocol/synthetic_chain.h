// The `synthetic` job kind's result, as both sides of the trainer contract know it: a SHA-256
// hash chain that makes lost or repeated steps visible.
//   s0 = SHA-256(ASCII decimal of seed); s_k = SHA-256(s_{k-1} || k as 8-byte little-endian).
// The kind's output is chain.txt = hex(s_steps) + "\n" (agent/train/jobs/synthetic/synthetic.h runs
// the kind). The agent's self-test (supervisor/self_test.h) checks a trainer's output against
// SyntheticChainHex without linking the trainer's code.
// Portable and pure: no I/O, no exceptions. Thread-safe (no state).
#pragma once

#include <cstdint>
#include <string>

#include "shared/sha256.h"

namespace gleaner {

Digest SyntheticChainSeed(int64_t seed);
Digest SyntheticChainNext(const Digest& prev, int64_t k);
// Lowercase hex of s_steps, computed in one go (what an uninterrupted run writes, minus "\n").
std::string SyntheticChainHex(int64_t seed, int64_t steps);

}  // namespace gleaner
