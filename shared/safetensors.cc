#include "shared/safetensors.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "shared/json.h"

namespace gleaner::safetensors {
namespace {

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeInfo kDTypes[] = {
    {DType::kBool, "BOOL", 1}, {DType::kU8, "U8", 1},          {DType::kI8, "I8", 1},
    {DType::kI16, "I16", 2},   {DType::kU16, "U16", 2},        {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2}, {DType::kI32, "I32", 4},        {DType::kU32, "U32", 4},
    {DType::kF32, "F32", 4},   {DType::kF64, "F64", 8},        {DType::kI64, "I64", 8},
    {DType::kU64, "U64", 8},   {DType::kF8E4M3, "F8_E4M3", 1},
};

Status Bad(const std::string& m) {
  return Status::Corruption("safetensors: " + m);
}

// Reads a non-negative JSON integer (rejects floats, negatives, booleans).
bool ReadU64(const Json& j, uint64_t* out) {
  if (!j.is_number_unsigned()) return false;
  *out = j.get<uint64_t>();
  return true;
}

// Parses the header, rejecting duplicate keys at any level (nlohmann would keep the last one).
Result<Json> ParseHeader(std::string_view text) {
  if (text.empty() || text[0] != '{') return Bad("header does not start with '{'");
  std::vector<std::set<std::string>> keys;
  bool duplicate = false;
  std::string duplicate_key;
  Json::parser_callback_t cb = [&](int, Json::parse_event_t ev, Json& parsed) {
    if (ev == Json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (ev == Json::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (ev == Json::parse_event_t::key && !keys.empty() && parsed.is_string()) {
      if (!keys.back().insert(parsed.get_ref<const std::string&>()).second && !duplicate) {
        duplicate = true;
        duplicate_key = parsed.get_ref<const std::string&>();
      }
    }
    return true;
  };
  // Depth: top object -> tensor object -> shape array; metadata is one level.
  constexpr int kMaxDepth = 3;
  if (!JsonDepthWithin(text, kMaxDepth)) return Bad("header JSON nested too deeply");
  Json j = Json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Bad("header is not valid JSON");
  if (!j.is_object()) return Bad("header is not a JSON object");
  if (duplicate) return Bad("duplicate key \"" + duplicate_key + "\" in header");
  return j;
}

struct Entry {
  std::string name;
  uint64_t begin, end;
};

}  // namespace

const char* DTypeName(DType d) {
  for (const auto& t : kDTypes) {
    if (t.dtype == d) return t.name;
  }
  return "?";
}

bool ParseDType(std::string_view name, DType* out) {
  for (const auto& t : kDTypes) {
    if (name == t.name) {
      *out = t.dtype;
      return true;
    }
  }
  return false;
}

size_t DTypeSize(DType d) {
  for (const auto& t : kDTypes) {
    if (t.dtype == d) return t.size;
  }
  return 0;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Result<ParsedFile> Parse(std::string_view bytes) {
  if (bytes.size() < 8) return Bad("file shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  if (n > kMaxHeaderBytes) return Bad("header length " + std::to_string(n) + " exceeds 100 MB");
  if (n > bytes.size() - 8) return Bad("header length " + std::to_string(n) + " past end of file");
  std::string_view header = bytes.substr(8, size_t(n));
  std::string_view data = bytes.substr(8 + size_t(n));
  Result<Json> parsed = ParseHeader(header);
  if (!parsed.ok()) return parsed.status();
  const Json& j = parsed.value();

  ParsedFile out;
  std::vector<Entry> entries;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const Json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return Bad("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) return Bad("__metadata__." + m.key() + " is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    // Serialize refuses a nameless tensor, so a file with one could not be written back.
    if (name.empty()) return Bad("a tensor has an empty name");
    if (!v.is_object()) return Bad("tensor \"" + name + "\" is not an object");
    TensorView t;
    const std::string where = "tensor \"" + name + "\"";
    for (auto f = v.begin(); f != v.end(); ++f) {
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets") {
        return Bad(where + " has unknown field \"" + f.key() + "\"");
      }
    }
    auto dt = v.find("dtype");
    if (dt == v.end() || !dt->is_string()) return Bad(where + " has no dtype string");
    if (!ParseDType(dt->get_ref<const std::string&>(), &t.dtype)) {
      return Bad(where + " has unknown dtype \"" + dt->get<std::string>() + "\"");
    }
    auto sh = v.find("shape");
    if (sh == v.end() || !sh->is_array()) return Bad(where + " has no shape array");
    if (sh->size() > 16) return Bad(where + " has more than 16 dimensions");
    uint64_t numel = 1;
    for (const Json& d : *sh) {
      uint64_t dim = 0;
      if (!ReadU64(d, &dim) || dim > uint64_t(INT64_MAX)) {
        return Bad(where + " has a shape entry that is not a non-negative integer");
      }
      if (dim != 0 && numel > UINT64_MAX / dim) return Bad(where + " shape overflows");
      numel *= dim;
      t.shape.push_back(int64_t(dim));
    }
    size_t esize = DTypeSize(t.dtype);
    if (numel > UINT64_MAX / esize) return Bad(where + " byte size overflows");
    uint64_t nbytes = numel * esize;
    auto off = v.find("data_offsets");
    uint64_t b = 0, e = 0;
    if (off == v.end() || !off->is_array() || off->size() != 2 || !ReadU64((*off)[0], &b) ||
        !ReadU64((*off)[1], &e)) {
      return Bad(where + " data_offsets must be [begin, end] non-negative integers");
    }
    if (e < b) return Bad(where + " data_offsets end before begin");
    if (e - b != nbytes) {
      return Bad(where + " has " + std::to_string(e - b) + " bytes but shape x dtype needs " +
                 std::to_string(nbytes));
    }
    entries.push_back({name, b, e});
    out.tensors.emplace(name, std::move(t));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t pos = 0;
  for (const Entry& e : entries) {
    if (e.begin != pos) {
      return Bad("tensor \"" + e.name + "\" starts at " + std::to_string(e.begin) +
                 (e.begin < pos ? " overlapping the previous tensor" : " leaving a gap") +
                 " (expected " + std::to_string(pos) + ")");
    }
    pos = e.end;
  }
  if (pos != data.size()) {
    return Bad("tensors cover " + std::to_string(pos) + " bytes but the data buffer has " +
               std::to_string(data.size()));
  }
  for (const Entry& e : entries) {
    out.tensors[e.name].data = data.substr(size_t(e.begin), size_t(e.end - e.begin));
  }
  return out;
}

Result<std::string> Serialize(const std::map<std::string, TensorToWrite>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  uint64_t pos = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__") {
      return Status::Invalid("safetensors: invalid tensor name \"" + name + "\"");
    }
    uint64_t numel = 1;
    Json shape = Json::array();
    for (int64_t d : t.shape) {
      if (d < 0) return Status::Invalid("safetensors: negative dimension in \"" + name + "\"");
      numel *= uint64_t(d);
      shape.push_back(uint64_t(d));
    }
    if (numel * DTypeSize(t.dtype) != t.data.size()) {
      return Status::Invalid("safetensors: \"" + name + "\" data size does not match its shape");
    }
    header[name] = {{"dtype", DTypeName(t.dtype)},
                    {"shape", std::move(shape)},
                    {"data_offsets", {pos, pos + t.data.size()}}};
    pos += t.data.size();
  }
  std::string text = DumpJson(header);
  while (text.size() % 8 != 0) text.push_back(' ');
  std::string out;
  out.reserve(8 + text.size() + size_t(pos));
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(char((n >> (8 * i)) & 0xff));
  out += text;
  for (const auto& [name, t] : tensors) out.append(t.data.data(), t.data.size());
  return out;
}

}  // namespace gleaner::safetensors
