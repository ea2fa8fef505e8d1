#include "agent/train/images/resize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace gleaner::images {
namespace {

// Pillow's fixed point: 8 bits of result, 2 bits of headroom for filters with negative lobes.
constexpr int kPrecisionBits = 32 - 8 - 2;

double BilinearFilter(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

double Sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= M_PI;
  return std::sin(x) / x;
}

double LanczosFilter(double x) {
  return (-3.0 <= x && x < 3.0) ? Sinc(x) * Sinc(x / 3) : 0.0;
}

// For each output position: the first input index, how many inputs, and their fixed-point
// weights (ksize slots per output, unused slots 0).
struct Coefficients {
  int ksize = 0;
  std::vector<int> first, count;
  std::vector<int32_t> weights;
};

// Pillow's precompute_coeffs() + normalize_coeffs_8bpc(), same operations in the same order,
// for the output positions [out0, out0 + count) of out_size.
Coefficients Precompute(int in_size, int out_size, int out0, int count, ResizeFilter filter) {
  double (*fn)(double) = filter == ResizeFilter::kLanczos ? LanczosFilter : BilinearFilter;
  const double filter_support = filter == ResizeFilter::kLanczos ? 3.0 : 1.0;
  const double scale = double(in_size) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = filter_support * filterscale;
  const double inv_filterscale = 1.0 / filterscale;
  Coefficients c;
  c.ksize = int(std::ceil(support)) * 2 + 1;
  c.first.resize(count);
  c.count.resize(count);
  c.weights.assign(size_t(count) * c.ksize, 0);
  std::vector<double> k(c.ksize);
  for (int i = 0; i < count; ++i) {
    const int xx = out0 + i;
    double center = (xx + 0.5) * scale;
    int xmin = int(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = int(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int x = 0; x < xmax; ++x) {
      double w = fn((x + xmin - center + 0.5) * inv_filterscale);
      k[x] = w;
      ww += w;
    }
    for (int x = 0; x < xmax; ++x) {
      if (ww != 0.0) k[x] /= ww;
      double v = k[x] * (1 << kPrecisionBits);
      c.weights[size_t(i) * c.ksize + x] = int32_t(k[x] < 0 ? -0.5 + v : 0.5 + v);
    }
    c.first[i] = xmin;
    c.count[i] = xmax;
  }
  return c;
}

inline uint8_t Clip8(int32_t v) {
  int32_t s = v >> kPrecisionBits;  // arithmetic shift, as Pillow's table lookup
  return uint8_t(s < 0 ? 0 : s > 255 ? 255 : s);
}

// Rows [row0, row0 + out.height) of `in`, resampled horizontally into `out`.
void Horizontal(const Image& in, int row0, const Coefficients& c, Image* out) {
  for (int y = 0; y < out->height; ++y) {
    const uint8_t* src = in.pixel(0, row0 + y);
    uint8_t* dst = out->pixel(0, y);
    for (int xx = 0; xx < out->width; ++xx, dst += 3) {
      const int32_t* k = &c.weights[size_t(xx) * c.ksize];
      const uint8_t* p = src + size_t(c.first[xx]) * 3;
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int x = 0; x < c.count[xx]; ++x, p += 3) {
        s0 += p[0] * k[x];
        s1 += p[1] * k[x];
        s2 += p[2] * k[x];
      }
      dst[0] = Clip8(s0);
      dst[1] = Clip8(s1);
      dst[2] = Clip8(s2);
    }
  }
}

// Vertical pass over columns [col0, col0 + out.width) of `in`; `row0` is subtracted from the
// coefficients' first rows (the horizontal pass only produced the rows the vertical one reads).
void Vertical(const Image& in, int row0, int col0, const Coefficients& c, Image* out) {
  const size_t stride = size_t(in.width) * 3, row_bytes = size_t(out->width) * 3;
  for (int yy = 0; yy < out->height; ++yy) {
    const int32_t* k = &c.weights[size_t(yy) * c.ksize];
    const uint8_t* top = in.pixel(col0, c.first[yy] - row0);
    uint8_t* dst = out->pixel(0, yy);
    for (size_t i = 0; i < row_bytes; ++i) {
      int32_t s = 1 << (kPrecisionBits - 1);
      const uint8_t* p = top + i;
      for (int y = 0; y < c.count[yy]; ++y, p += stride) s += *p * k[y];
      dst[i] = Clip8(s);
    }
  }
}

}  // namespace

Image ResizeCrop(const Image& in, int width, int height, int left, int top, int crop_width,
                 int crop_height, ResizeFilter filter) {
  const bool horizontal = width != in.width, vertical = height != in.height;
  if (!horizontal && !vertical) {
    Image out(crop_width, crop_height);
    for (int y = 0; y < crop_height; ++y) {
      std::copy_n(in.pixel(left, top + y), size_t(crop_width) * 3, out.pixel(0, y));
    }
    return out;
  }
  Coefficients cv = Precompute(in.height, height, top, crop_height, filter);
  if (!horizontal) {
    Image out(crop_width, crop_height);
    Vertical(in, 0, left, cv, &out);
    return out;
  }
  // Only the input rows the vertical pass reads go through the horizontal pass.
  const int row0 = vertical ? cv.first[0] : top;
  const int row_end = vertical ? cv.first.back() + cv.count.back() : top + crop_height;
  Coefficients ch = Precompute(in.width, width, left, crop_width, filter);
  Image tmp(crop_width, row_end - row0);
  Horizontal(in, row0, ch, &tmp);
  if (!vertical) return tmp;
  Image out(crop_width, crop_height);
  Vertical(tmp, row0, 0, cv, &out);
  return out;
}

Image Resize(const Image& in, int width, int height, ResizeFilter filter) {
  return ResizeCrop(in, width, height, 0, 0, width, height, filter);
}

}  // namespace gleaner::images
