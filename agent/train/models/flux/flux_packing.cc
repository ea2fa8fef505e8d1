#include "agent/train/models/flux/flux_packing.h"

namespace gleaner::train::flux {

using torch::Tensor;

Tensor PackLatents(const Tensor& x) {
  TORCH_CHECK(x.dim() == 4 && x.size(2) % 2 == 0 && x.size(3) % 2 == 0,
              "latents must be [B, C, h, w] with even h and w, got ", x.sizes());
  const int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  return x.reshape({b, c, h / 2, 2, w / 2, 2})
      .permute({0, 2, 4, 1, 3, 5})
      .reshape({b, (h / 2) * (w / 2), c * 4});
}

Tensor UnpackLatents(const Tensor& t, int64_t h, int64_t w) {
  TORCH_CHECK(t.dim() == 3 && h % 2 == 0 && w % 2 == 0 && t.size(1) == (h / 2) * (w / 2) &&
                  t.size(2) % 4 == 0,
              "tokens [B, ", (h / 2) * (w / 2), ", 4C] expected for a ", h, "x", w, " latent, got ",
              t.sizes());
  const int64_t b = t.size(0), c = t.size(2) / 4;
  return t.reshape({b, h / 2, w / 2, c, 2, 2}).permute({0, 3, 1, 4, 2, 5}).reshape({b, c, h, w});
}

Tensor LatentImageIds(int64_t rows, int64_t cols, const torch::Device& device) {
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  Tensor ids = torch::zeros({rows, cols, 3}, f32);
  ids.select(2, 1).copy_(torch::arange(rows, f32).unsqueeze(1).expand({rows, cols}));
  ids.select(2, 2).copy_(torch::arange(cols, f32).unsqueeze(0).expand({rows, cols}));
  return ids.reshape({rows * cols, 3});
}

}  // namespace gleaner::train::flux
