// MultiHeadAttention (agent/train/nn/attention.h) against a float64 reference computed here, on
// every kernel this libtorch has (explicit always; fused with libtorch 2.1+), and
// torch_compat.h's AutocastScope.
#include "agent/train/nn/attention.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "agent/train/nn/torch_compat.h"
#include "train_test_util.h"  // Catch2, via the CHECK fix-up

using namespace gleaner::train;
using namespace gleaner::train::testing;
using torch::Tensor;

namespace {

// softmax(q k^T * scale) v in float64, from [B, L, H*d] inputs, heads split as diffusers does.
Tensor Reference(const Tensor& q, const Tensor& k, const Tensor& v, int64_t heads, double scale,
                 bool causal) {
  auto split = [&](const Tensor& t) {
    return t.to(torch::kFloat64)
        .reshape({t.size(0), t.size(1), heads, t.size(2) / heads})
        .permute({0, 2, 1, 3});
  };
  Tensor scores = torch::matmul(split(q), split(k).transpose(-1, -2)) * scale;  // [B,H,Lq,Lk]
  if (causal) {
    Tensor mask = torch::ones({q.size(1), k.size(1)}, torch::kBool).triu(1);
    scores = scores.masked_fill(mask, -std::numeric_limits<double>::infinity());
  }
  Tensor y = torch::matmul(scores.softmax(-1), split(v));  // [B,H,Lq,d]
  return y.permute({0, 2, 1, 3}).reshape({q.size(0), q.size(1), v.size(2)});
}

std::vector<AttentionKernel> Kernels() {
  if (kHasFusedAttention) return {AttentionKernel::kExplicit, AttentionKernel::kFused};
  return {AttentionKernel::kExplicit};
}

const char* Name(AttentionKernel k) {
  return k == AttentionKernel::kFused ? "fused" : "explicit";
}

struct Shape {
  int64_t batch, lq, lk, heads, head_dim;
  bool causal;
  double scale;
};
// Cross-attention (Lq != Lk), causal self-attention, one head with SD 1.5's head dim.
const Shape kShapes[] = {{2, 5, 7, 2, 8, false, 0.3},
                         {1, 6, 6, 4, 16, true, 0.25},
                         {2, 9, 3, 1, 40, false, 1.0 / std::sqrt(40.0)}};

}  // namespace

TEST_CASE("attention matches a float64 reference on every kernel of this libtorch", "[attention]") {
  for (AttentionKernel kernel : Kernels()) {
    for (const Shape& s : kShapes) {
      for (bool upcast : {false, true}) {
        torch::manual_seed(3);
        Tensor q = torch::randn({s.batch, s.lq, s.heads * s.head_dim});
        Tensor k = torch::randn({s.batch, s.lk, s.heads * s.head_dim});
        Tensor v = torch::randn({s.batch, s.lk, s.heads * s.head_dim});
        AttentionOptions o;
        o.heads = s.heads;
        o.scale = s.scale;
        o.causal = s.causal;
        o.upcast = upcast;
        o.kernel = kernel;
        Tensor y = MultiHeadAttention(q, k, v, o);
        INFO(Name(kernel) << " heads " << s.heads << " Lq " << s.lq << " Lk " << s.lk << " causal "
                          << s.causal << " upcast " << upcast);
        REQUIRE(y.sizes() == q.sizes());
        CHECK(y.scalar_type() == torch::kFloat32);
        CHECK(RelL2(y, Reference(q, k, v, s.heads, s.scale, s.causal)) <= 1e-6);
      }
    }
  }
}

TEST_CASE("attention gradients match the float64 reference", "[attention]") {
  for (AttentionKernel kernel : Kernels()) {
    for (const Shape& s : kShapes) {
      torch::manual_seed(4);
      int64_t dim = s.heads * s.head_dim;
      Tensor q = torch::randn({s.batch, s.lq, dim}).requires_grad_(true);
      Tensor k = torch::randn({s.batch, s.lk, dim}).requires_grad_(true);
      Tensor v = torch::randn({s.batch, s.lk, dim}).requires_grad_(true);
      Tensor w = torch::randn({s.batch, s.lq, dim});
      AttentionOptions o;
      o.heads = s.heads;
      o.scale = s.scale;
      o.causal = s.causal;
      o.kernel = kernel;
      (MultiHeadAttention(q, k, v, o) * w).sum().backward();
      Tensor q64 = q.detach().to(torch::kFloat64).requires_grad_(true);
      Tensor k64 = k.detach().to(torch::kFloat64).requires_grad_(true);
      Tensor v64 = v.detach().to(torch::kFloat64).requires_grad_(true);
      (Reference(q64, k64, v64, s.heads, s.scale, s.causal) * w.to(torch::kFloat64))
          .sum()
          .backward();
      INFO(Name(kernel) << " heads " << s.heads << " causal " << s.causal << " |dq| "
                        << q.grad().norm().item<double>() << " |dq64| "
                        << q64.grad().norm().item<double>());
      CHECK(RelL2(q.grad(), q64.grad()) <= 1e-5);
      CHECK(RelL2(k.grad(), k64.grad()) <= 1e-5);
      CHECK(RelL2(v.grad(), v64.grad()) <= 1e-5);
    }
  }
}

TEST_CASE("GLEANER_ATTENTION=explicit forces the explicit kernel, fused only where it exists",
          "[attention]") {
  AttentionKernel automatic =
      kHasFusedAttention ? AttentionKernel::kFused : AttentionKernel::kExplicit;
  CHECK(ResolveAttentionKernel("explicit") == AttentionKernel::kExplicit);
  CHECK(ResolveAttentionKernel(nullptr) == automatic);
  CHECK(ResolveAttentionKernel("") == automatic);
  CHECK(ResolveAttentionKernel("fused") == automatic);
  if (!kHasFusedAttention) {
    AttentionOptions o;
    o.kernel = AttentionKernel::kFused;
    Tensor x = torch::randn({1, 2, 4});
    CHECK_THROWS_WITH(MultiHeadAttention(x, x, x, o),
                      Catch::Contains("fused attention needs libtorch 2.1"));
  }
}

TEST_CASE("upcast keeps scores and softmax in fp32 under bf16 autocast", "[attention]") {
  // bf16 inputs, as they come out of autocast's linear layers; logits large enough that bf16
  // scores lose visibly (std ~ 9).
  torch::manual_seed(5);
  int64_t heads = 2, d = 64;
  Tensor q = (torch::randn({1, 64, heads * d}) * 3).to(torch::kBFloat16);
  Tensor k = (torch::randn({1, 64, heads * d}) * 3).to(torch::kBFloat16);
  Tensor v = torch::randn({1, 64, heads * d}).to(torch::kBFloat16);
  Tensor ref = Reference(q, k, v, heads, 1.0 / std::sqrt(double(d)), false);
  AutocastScope autocast(torch::kCPU, torch::kBFloat16);
  for (AttentionKernel kernel : Kernels()) {
    AttentionOptions o;
    o.heads = heads;
    o.scale = 1.0 / std::sqrt(double(d));
    o.kernel = kernel;
    double plain = RelL2(MultiHeadAttention(q, k, v, o), ref);
    o.upcast = true;
    Tensor y = MultiHeadAttention(q, k, v, o);
    double upcast = RelL2(y, ref);
    INFO(Name(kernel) << ": rel-L2 bf16 scores " << plain << ", upcast " << upcast);
    CHECK(y.scalar_type() == torch::kBFloat16);
    CHECK(upcast < 0.5 * plain);
    CHECK(upcast <= 1e-2);
  }
}

TEST_CASE("AutocastScope turns autocast on for its scope and restores the state", "[attention]") {
  Tensor a = torch::randn({4, 4}), b = torch::randn({4, 4});
  CHECK(torch::mm(a, b).scalar_type() == torch::kFloat32);
  {
    AutocastScope outer(torch::kCPU, torch::kBFloat16);
    CHECK(torch::mm(a, b).scalar_type() == torch::kBFloat16);
    {
      AutocastScope inner(torch::kCPU, torch::kBFloat16);
      CHECK(torch::mm(a, b).scalar_type() == torch::kBFloat16);
    }
    CHECK(torch::mm(a, b).scalar_type() == torch::kBFloat16);
  }
  CHECK(torch::mm(a, b).scalar_type() == torch::kFloat32);
}

TEST_CASE("GLEANER_TORCH_AT_LEAST compares with the libtorch compiled against", "[attention]") {
  // Compile-time: the one version macro every 2.x branch of torch_compat.h is guarded by.
  static_assert(GLEANER_TORCH_AT_LEAST(1, 13), "the trainer needs libtorch 1.13 or newer");
  static_assert(GLEANER_TORCH_AT_LEAST(TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR));
  static_assert(!GLEANER_TORCH_AT_LEAST(TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR + 1));
  static_assert(!GLEANER_TORCH_AT_LEAST(TORCH_VERSION_MAJOR + 1, 0));
  static_assert(GLEANER_TORCH_AT_LEAST(TORCH_VERSION_MAJOR - 1, 99));
  static_assert(kHasFusedAttention == GLEANER_TORCH_AT_LEAST(2, 1));
  CHECK(std::string(TORCH_VERSION)
            .rfind(std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) +
                       ".",
                   0) == 0);
}

TEST_CASE("attention never reads the memory its scores are computed into", "[attention]") {
  // libtorch before 2.0 computed baddbmm(input, ..., beta=0) for small CPU matrices as
  // beta * out + alpha * q k^T, reading the uninitialised output: whatever the allocator handed
  // back (here: NaN, freed just before) came out as NaN scores. Every kernel must be immune.
  torch::manual_seed(5);
  for (AttentionKernel kernel : Kernels()) {
    for (int64_t len : {1, 2, 6, 7}) {
      for (int round = 0; round < 20; ++round) {
        INFO("kernel " << int(kernel) << ", len " << len << ", round " << round);
        Tensor q = torch::randn({2, len, 8}), k = torch::randn({2, len, 8}),
               v = torch::randn({2, len, 8});
        {
          // Freed memory of exactly the scores' size, full of NaN, for the next allocation.
          Tensor poison = torch::full({2 * 2, len, len}, std::nan(""));
        }
        AttentionOptions o;
        o.heads = 2;
        o.scale = 0.5;
        o.causal = round % 2 == 0;
        o.kernel = kernel;
        Tensor y = MultiHeadAttention(q, k, v, o);
        REQUIRE(torch::isfinite(y).all().item<bool>());
      }
    }
  }
}
