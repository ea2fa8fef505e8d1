// safetensors reader and writer (https://github.com/huggingface/safetensors format).
//
// Layout: u64 little-endian header length N, N bytes of JSON header, then the data buffer.
// Header: {"__metadata__": {str: str}?, "<name>": {"dtype", "shape", "data_offsets": [b, e]}}.
//
// Contract: portable (no exceptions, no I/O). Parse() validates as strictly as the reference
// implementation: N <= 100 MB and within the buffer, the header is one JSON object starting with
// '{', known dtypes only, non-negative shapes, offsets that are in order, non-overlapping and
// cover the data buffer exactly, size == prod(shape) * dtype size, metadata string -> string only,
// no duplicate keys. Any violation is a kCorruption Status naming the problem; never crashes.
// Parsed tensors are views into the caller's buffer, which must outlive them.
// Serialize() writes a header padded with spaces to a multiple of 8 bytes, keys (and data) in
// sorted name order, so the same input always gives the same bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"

namespace gleaner::safetensors {

enum class DType {
  kBool,
  kU8,
  kI8,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kF64,
  kI64,
  kU64,
  kF8E4M3,  // float8_e4m3fn ("F8_E4M3"): fp8 checkpoints (FLUX single files)
};

// "F32", "BF16", ... as written in headers.
const char* DTypeName(DType d);
// Parses a header dtype name; false if unknown.
bool ParseDType(std::string_view name, DType* out);
// Bytes per element.
size_t DTypeSize(DType d);

constexpr uint64_t kMaxHeaderBytes = 100u * 1000u * 1000u;

struct TensorView {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::string_view data;  // exactly prod(shape) * DTypeSize(dtype) bytes, little-endian
  int64_t numel() const;
};

struct ParsedFile {
  std::map<std::string, TensorView> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
};

// Validates and indexes a whole file held in memory. Views point into `bytes`.
Result<ParsedFile> Parse(std::string_view bytes);

struct TensorToWrite {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::string_view data;  // must be prod(shape) * DTypeSize(dtype) bytes
};

// Builds the file bytes. Fails (kInvalidArgument) on a size/shape mismatch, a negative dim, an
// empty or "__metadata__" name.
Result<std::string> Serialize(const std::map<std::string, TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

}  // namespace gleaner::safetensors
