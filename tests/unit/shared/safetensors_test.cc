#include "shared/safetensors.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include "shared/json.h"
#include "tests/skip.h"

using namespace gleaner;
using namespace gleaner::safetensors;

namespace {

// A file from a raw header text and a data buffer (header padded with spaces to 8 bytes).
std::string Raw(std::string header, const std::string& data, bool pad = true) {
  while (pad && header.size() % 8 != 0) header.push_back(' ');
  std::string out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(char((n >> (8 * i)) & 0xff));
  return out + header + data;
}

std::string Floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(&s[0], v.begin(), s.size());
  return s;
}

bool Rejects(const std::string& bytes, const char* needle) {
  Result<ParsedFile> r = Parse(bytes);
  if (r.ok()) return false;
  INFO(r.status().message());
  CHECK(r.status().code() == Code::kCorruption);
  return r.status().message().find(needle) != std::string::npos;
}

}  // namespace

TEST_CASE("safetensors round trip keeps names, dtypes, shapes, bytes and metadata",
          "[safetensors]") {
  std::string a = Floats({1, 2, 3, 4, 5, 6});
  std::string b(2 * 3 * 2, '\x7f');  // BF16 [2,3]
  std::string c(8, '\x01');          // I64 scalar
  std::map<std::string, TensorToWrite> in = {{"w.a", {DType::kF32, {2, 3}, a}},
                                             {"b", {DType::kBF16, {2, 3}, b}},
                                             {"alpha", {DType::kI64, {}, c}},
                                             {"empty", {DType::kF16, {0, 4}, {}}}};
  Result<std::string> bytes = Serialize(in, {{"rank", "4"}, {"format", "pt"}});
  REQUIRE(bytes.ok());
  uint64_t n = 0;
  std::memcpy(&n, bytes->data(), 8);
  CHECK(n % 8 == 0);
  CHECK((*bytes)[8] == '{');
  Result<ParsedFile> f = Parse(*bytes);
  REQUIRE(f.ok());
  REQUIRE(f->tensors.size() == 4);
  CHECK(f->metadata.at("rank") == "4");
  CHECK(f->metadata.at("format") == "pt");
  for (const auto& [name, t] : in) {
    const TensorView& v = f->tensors.at(name);
    CHECK(v.dtype == t.dtype);
    CHECK(v.shape == t.shape);
    CHECK(v.data == t.data);
  }
  CHECK(f->tensors.at("alpha").numel() == 1);
  CHECK(f->tensors.at("empty").numel() == 0);
  // Deterministic: same input, same bytes.
  CHECK(*Serialize(in, {{"format", "pt"}, {"rank", "4"}}) == *bytes);
}

TEST_CASE("safetensors accepts a file with no tensors and no padding", "[safetensors]") {
  REQUIRE(Parse(Raw("{}", "", false)).ok());
  REQUIRE(Parse(Raw(R"({"__metadata__":{}})", "")).ok());
}

TEST_CASE("safetensors dtype names and sizes", "[safetensors]") {
  DType d;
  REQUIRE(ParseDType("BF16", &d));
  CHECK(d == DType::kBF16);
  CHECK(DTypeSize(d) == 2);
  CHECK(DTypeSize(DType::kI64) == 8);
  CHECK(std::string(DTypeName(DType::kF32)) == "F32");
  CHECK_FALSE(ParseDType("F128", &d));
  CHECK_FALSE(ParseDType("f32", &d));
}

TEST_CASE("safetensors rejects malformed files with a reason", "[safetensors]") {
  std::string eight = Floats({1, 2});
  std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  REQUIRE(Parse(Raw(ok, eight)).ok());

  CHECK(Rejects("", "shorter"));
  CHECK(Rejects(std::string("\x05\0\0", 3), "shorter"));
  // Header length past the end, and huge header lengths.
  CHECK(Rejects(Raw(ok, eight).substr(0, 20), "past end"));
  std::string huge(8, '\xff');
  CHECK(Rejects(huge + "{}", "exceeds 100 MB"));
  std::string just_over(8, '\0');
  uint64_t n = kMaxHeaderBytes + 1;
  std::memcpy(&just_over[0], &n, 8);
  CHECK(Rejects(just_over, "exceeds 100 MB"));
  // Truncated data.
  std::string full = Raw(ok, eight);
  CHECK(Rejects(full.substr(0, full.size() - 1), "cover"));
  // Extra trailing bytes.
  CHECK(Rejects(full + "xxxx", "cover"));
  // Non-object header and bad JSON.
  CHECK(Rejects(Raw("[1,2]", ""), "start with '{'"));
  CHECK(Rejects(Raw(" {}", ""), "start with '{'"));
  CHECK(Rejects(Raw("{\"a\":", ""), "not valid JSON"));
  CHECK(Rejects(Raw("{}[]", ""), "not valid JSON"));
  CHECK(Rejects(Raw(R"({"a":[1]})", ""), "not an object"));
  // Bad dtype, shape, offsets.
  CHECK(Rejects(Raw(R"({"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", eight),
                "unknown dtype"));
  CHECK(Rejects(Raw(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
                "shape entry"));
  CHECK(Rejects(Raw(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", eight),
                "shape entry"));
  CHECK(Rejects(Raw(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
                "shape x dtype"));
  CHECK(Rejects(Raw(R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", eight),
                "shape x dtype"));
  CHECK(Rejects(Raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", eight),
                "end before begin"));
  CHECK(Rejects(Raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", eight),
                "data_offsets"));
  CHECK(Rejects(Raw(R"({"a":{"dtype":"F32","shape":[2]}})", eight), "data_offsets"));
  CHECK(Rejects(Raw(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", eight), "dtype"));
  CHECK(Rejects(Raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", eight),
                "unknown field"));
  CHECK(Rejects(Raw(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],)"
                    R"("data_offsets":[0,8]}})",
                    eight),
                "overflow"));
  // Overlap and gaps between tensors.
  std::string sixteen = Floats({1, 2, 3, 4});
  CHECK(Parse(Raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                  sixteen))
            .ok());
  CHECK(Rejects(Raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                    sixteen),
                "overlapping"));
  CHECK(Rejects(Raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                    sixteen),
                "gap"));
  // Metadata must be string -> string.
  CHECK(Rejects(Raw(R"({"__metadata__":{"a":1}})", ""), "not a string"));
  CHECK(Rejects(Raw(R"({"__metadata__":"x"})", ""), "not an object"));
  // Duplicate keys would be ambiguous.
  CHECK(Rejects(Raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                    eight),
                "duplicate"));
  // Deep nesting.
  CHECK(Rejects(Raw(R"({"a":{"dtype":"F32","shape":[[[[2]]]],"data_offsets":[0,8]}})", eight),
                "nested"));
}

TEST_CASE("safetensors writer rejects inconsistent tensors", "[safetensors]") {
  std::string four = Floats({1});
  CHECK_FALSE(Serialize({{"a", {DType::kF32, {2}, four}}}).ok());
  CHECK_FALSE(Serialize({{"a", {DType::kF32, {-1}, four}}}).ok());
  CHECK_FALSE(Serialize({{"", {DType::kF32, {1}, four}}}).ok());
  CHECK_FALSE(Serialize({{"__metadata__", {DType::kF32, {1}, four}}}).ok());
}

TEST_CASE("safetensors parser survives random corruption", "[safetensors]") {
  std::string a = Floats({1, 2, 3, 4, 5, 6});
  Result<std::string> good =
      Serialize({{"x", {DType::kF32, {2, 3}, a}}, {"y", {DType::kF32, {6}, a}}}, {{"k", "v"}});
  REQUIRE(good.ok());
  std::mt19937 rng(1);
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string b = *good;
    int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = char(rng());
    if (rng() % 4 == 0) b.resize(rng() % b.size());
    Result<ParsedFile> r = Parse(b);
    if (r.ok()) {
      ++accepted;
      for (const auto& [name, t] : r->tensors) {
        CHECK(t.data.size() == size_t(t.numel()) * DTypeSize(t.dtype));
        CHECK(t.data.data() >= b.data());
        CHECK(t.data.data() + t.data.size() <= b.data() + b.size());
      }
    }
  }
  CHECK(accepted < 3000);
}

TEST_CASE("safetensors reads the reference fixture files", "[safetensors][fixture]") {
  // Files written by the reference implementation parse (checked only when the fixtures exist).
  std::string path = std::string(GLEANER_FIXTURES_DIR) + "/unet-ref-a/inputs.safetensors";
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    GLEANER_SKIP("fixture " << path << " not present");
  }
  std::string bytes;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.append(buf, got);
  std::fclose(f);
  Result<ParsedFile> r = Parse(bytes);
  REQUIRE(r.ok());
  CHECK(r->tensors.at("sample").shape == std::vector<int64_t>{2, 4, 16, 16});
  CHECK(r->tensors.at("timestep").dtype == DType::kI64);
}
