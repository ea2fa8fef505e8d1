// The two libtorch generations the trainer builds against, from one source: Debian's libtorch
// 1.13 (CPU; CI) and the libtorch inside a PyTorch 2.x install (CUDA). Every check of the libtorch
// version lives in this header; the rest of the trainer calls what it defines.
//
//   GLEANER_TORCH_AT_LEAST(major, minor)  the libtorch we compile against is at least that
//   kHasFusedAttention                    at::scaled_dot_product_attention with `scale` (2.1)
//   FusedAttention                        that call
//   AutocastScope                         torch.autocast(device, dtype) for a C++ scope
//   AutocastEnabled/Dtype, SetAutocast*   one device type's autocast state
//   kHasFp8, IsFp8, ToFp8                 float8_e4m3fn storage (2.1)
//   UseDeterministicAlgorithms, UseFullFp32   process-wide numerics switches
//
// Contract: header-only, no state of its own. AutocastScope, UseDeterministicAlgorithms and
// UseFullFp32 change libtorch's thread-local (autocast) or process-wide settings; call the
// latter two before any CUDA work. None of them throws for CPU or CUDA devices.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#define GLEANER_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||          \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace gleaner::train {

// ---- Fused attention -------------------------------------------------------------------------

#if GLEANER_TORCH_AT_LEAST(2, 1)
constexpr bool kHasFusedAttention = true;

// softmax(q k^T * scale) v on q [B, H, Lq, d], k and v [B, H, Lk, d]; `causal` masks key j > query
// i. On CUDA libtorch picks the flash or memory-efficient kernel when the shapes and dtype allow.
// (2.0 has the call too, but without `scale`, the 7th positional argument in C++ since 2.1.)
inline torch::Tensor FusedAttention(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, double scale, bool causal) {
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, causal,
                                          scale);
}
#else
constexpr bool kHasFusedAttention = false;
#endif

// ---- fp8 storage -----------------------------------------------------------------------------

// float8_e4m3fn (1 sign, 4 exponent, 3 mantissa bits, max 448, no infinities: a larger value
// becomes NaN) as a storage dtype for frozen weights; computed with after an upcast. 2.1 has the
// dtype and its CPU and CUDA casts.
#if GLEANER_TORCH_AT_LEAST(2, 1)
constexpr bool kHasFp8 = true;
inline bool IsFp8(const torch::Tensor& t) {
  return t.scalar_type() == c10::kFloat8_e4m3fn;
}
inline torch::Tensor ToFp8(const torch::Tensor& t, const torch::Device& device) {
  return t.to(device, c10::kFloat8_e4m3fn);
}
#else
constexpr bool kHasFp8 = false;
inline bool IsFp8(const torch::Tensor&) {
  return false;
}
inline torch::Tensor ToFp8(const torch::Tensor&, const torch::Device&) {
  TORCH_CHECK(false, "fp8 storage needs libtorch 2.1 or newer (this is ", TORCH_VERSION, ")");
  return torch::Tensor();
}
#endif

// ---- Autocast ---------------------------------------------------------------------------------

// The autocast state of one device type (kCPU or kCUDA): enabled, and the dtype it casts to.
// 2.4 replaced the per-device functions (and deprecated them) with ones taking the device type.
#if GLEANER_TORCH_AT_LEAST(2, 4)
inline bool AutocastEnabled(c10::DeviceType d) {
  return at::autocast::is_autocast_enabled(d);
}
inline c10::ScalarType AutocastDtype(c10::DeviceType d) {
  return at::autocast::get_autocast_dtype(d);
}
inline void SetAutocastEnabled(c10::DeviceType d, bool on) {
  at::autocast::set_autocast_enabled(d, on);
}
inline void SetAutocastDtype(c10::DeviceType d, c10::ScalarType t) {
  at::autocast::set_autocast_dtype(d, t);
}
#else
inline bool AutocastEnabled(c10::DeviceType d) {
  return d == c10::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
inline c10::ScalarType AutocastDtype(c10::DeviceType d) {
  return d == c10::kCUDA ? at::autocast::get_autocast_gpu_dtype()
                         : at::autocast::get_autocast_cpu_dtype();
}
inline void SetAutocastEnabled(c10::DeviceType d, bool on) {
  if (d == c10::kCUDA) {
    at::autocast::set_enabled(on);
  } else {
    at::autocast::set_cpu_enabled(on);
  }
}
inline void SetAutocastDtype(c10::DeviceType d, c10::ScalarType t) {
  if (d == c10::kCUDA) {
    at::autocast::set_autocast_gpu_dtype(t);
  } else {
    at::autocast::set_autocast_cpu_dtype(t);
  }
}
#endif

// Autocast on `device` (kCPU or kCUDA) to `dtype` while the scope lives, as Python's
// `with torch.autocast(device, dtype):` (nesting counted, cast cache cleared when the outermost
// scope ends); the previous state is restored.
class AutocastScope {
 public:
  AutocastScope(c10::DeviceType device, c10::ScalarType dtype)
      : device_(device), was_enabled_(AutocastEnabled(device)), old_dtype_(AutocastDtype(device)) {
    SetAutocastDtype(device, dtype);
    SetAutocastEnabled(device, true);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    SetAutocastEnabled(device_, was_enabled_);
    SetAutocastDtype(device_, old_dtype_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType device_;
  bool was_enabled_;
  c10::ScalarType old_dtype_;
};

// ---- Process-wide numerics --------------------------------------------------------------------

// Deterministic kernels only (an op without one throws), cuDNN deterministic and not
// benchmarked, as torch.use_deterministic_algorithms(True). CUDA also needs
// CUBLAS_WORKSPACE_CONFIG=:4096:8 in the environment before CUDA starts.
inline void UseDeterministicAlgorithms() {
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
}

// fp32 matmuls and convolutions in full fp32 on CUDA (no TF32; libtorch's default lets cuDNN use
// TF32 for convolutions), as the reference fixtures were computed.
inline void UseFullFp32() {
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
}

}  // namespace gleaner::train
