// Checks of the dense and hyper-connection ops (frank/cuda/dense_ops.cu, hyper_connection.cu)
// against the CPU reference: cpu::linear, cpu::rms_norm, engine::RopeTable::apply, the embedding
// copy of engine::Model, engine::hc_mapping / collapse_streams / hc_expand / hyper_head.
//
// Outputs start poisoned with NaN (all bits set), so an element a kernel fails to write fails the
// check; elements a kernel must not write (strided linear) must still hold the poison.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "cuda_util.h"
#include "frank/core/dtype.h"
#include "frank/core/splitmix64.h"
#include "frank/core/tensor.h"
#include "frank/cpu/ops.h"
#include "frank/cpu/quantized_linear.h"
#include "frank/cuda/native_weight.h"
#include "frank/cuda/ops.cuh"
#include "frank/engine/hyper_connection.h"
#include "frank/engine/rope.h"
#include "frank/model/config.h"
#include "frank/model/weights.h"
#include "ops_check.h"
#include "ops_check_util.h"

namespace frank_test {

// Split-K sums in a fixed order: a second run of an op on the same input gives the same bits.
int check_rerun(const char* op, const std::string& shape, const std::vector<std::vector<float>>& runs,
                const std::vector<std::vector<float>>& reruns) {
  bool same = runs.size() == reruns.size();
  for (size_t i = 0; same && i < runs.size(); ++i)
    same = runs[i].size() == reruns[i].size() &&
           std::memcmp(runs[i].data(), reruns[i].data(), runs[i].size() * sizeof(float)) == 0;
  return report(op, (shape + " rerun bit-identical").c_str(), same ? 0.0 : 1.0, 0.0);
}

// Hyper-connection weights of a site (rows = (2+N)*N, 3 scales) or of the head (rows = N, 1 scale):
// fn · RMS(x) has unit scale (fn entries of variance 1/K), so the sigmoids and the softmax see
// logits of order one, neither saturated nor flat.
frank::model::HyperConnectionWeights make_hc_weights(Random& rng, int N, int D, int rows, int scales) {
  const int64_t K = int64_t{N} * D;
  const float a = std::sqrt(3.0f / static_cast<float>(K));
  return {frank::Tensor({rows, K}, rng.vec(static_cast<size_t>(rows * K), -a, a)),
          frank::Tensor({rows}, rng.vec(rows, -1.0f, 1.0f)), frank::Tensor({scales}, rng.vec(scales, 0.5f, 2.0f))};
}

frank::model::ModelConfig hc_config(int N, int D) {
  frank::model::ModelConfig c;
  c.hidden_size = D;
  c.hc_mult = N;
  c.hc_sinkhorn_iters = 20;
  c.hc_eps = 1e-6f;
  c.rms_norm_eps = 1e-6f;
  return c;
}

namespace {

namespace cuda = frank::cuda;
using frank::Tensor;

// fp32 accumulation against the double-accumulating reference (ops_check.h).
constexpr double kTol = 1e-4;

// Round to nearest even (the test data holds no NaN).
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// A random [out, in] weight of type wt as device bytes (weight_format.h), and in w the fp32 values
// the reference computes with: bf16 the rounded values, FP8 / FP4 cpu::dequantize's exact ones.
std::vector<uint8_t> random_weight(Random& rng, cuda::WeightType wt, int64_t out, int64_t in, Tensor& w) {
  if (cuda::is_quantized(wt)) {
    // Scales 2^-9 .. 2^-3 for FP8 (codes reach 448), 2^-3 .. 2^1 for FP4 (up to 6): weights mostly
    // within +-8 like the dense checks' +-1, every decoded value and product a normal fp32.
    const bool fp4 = wt == cuda::WeightType::Fp4;
    const frank::QuantizedMatrix q = random_quantized(rng.gen(), wt, out, in, fp4 ? -3 : -9, fp4 ? 5 : 7);
    w = Tensor({out, in}, frank::cpu::dequantize(q));
    return cuda::native_bytes(q);
  }
  w = Tensor({out, in}, rng.vec(static_cast<size_t>(out * in), -1.0f, 1.0f));
  std::vector<uint8_t> bytes(static_cast<size_t>(cuda::weight_bytes(wt, out, in)));
  if (wt == cuda::WeightType::BF16) {
    for (size_t i = 0; i < w.data.size(); ++i) {
      const uint16_t bits = to_bf16(w.data[i]);
      w.data[i] = frank::bf16_to_f32(bits);
      std::memcpy(bytes.data() + 2 * i, &bits, 2);
    }
  } else {
    std::memcpy(bytes.data(), w.data.data(), bytes.size());
  }
  return bytes;
}

// One launch: x columns [xo, xo + groups*in) of rows of ldx, y columns [yo, yo + groups*rows) of
// rows of ldy.
struct LinearRun {
  int n;
  int64_t ldx, xo, ldy, yo;
};

// The error of got against want ([n, out], w [out, in]: cpu::linear of it), the largest over the
// outputs, scaled as check_linear says: by max(1, |want|), and for FP8 / FP4 weights also by
// ||w_o ∘ x_t||_2 (x_row(t, o) is the input row output o of token t reads).
template <class XRow>
double linear_error(cuda::WeightType wt, const std::vector<float>& got, const std::vector<float>& want, const Tensor& w,
                    int n, XRow&& x_row) {
  if (!cuda::is_quantized(wt)) return max_scaled_error(got, want);
  const int64_t out = w.rows(), in = w.cols();
  double err = 0.0;
  for (int t = 0; t < n; ++t)
    for (int64_t o = 0; o < out; ++o) {
      const float* wo = w.row(o);
      const float* xt = x_row(t, o);
      double terms = 0.0;
      for (int64_t k = 0; k < in; ++k) terms += static_cast<double>(wo[k]) * xt[k] * wo[k] * xt[k];
      const size_t i = static_cast<size_t>(t * out + o);
      const double scale = std::max({1.0, std::abs(static_cast<double>(want[i])), std::sqrt(terms)});
      const double e = std::abs(static_cast<double>(got[i]) - want[i]) / scale;
      if (!(e <= err)) err = e;  // NaN fails
    }
  return err;
}

// A random [groups*rows, in] weight of type wt (random_weight), run on each of `runs` by linear
// (groups = 1) or linear_grouped; group g's reference is cpu::linear of its rows on its `in`
// columns. y outside the written columns must keep its poison. The kernels compute with exactly
// the reference's weights (bf16, e4m3 / e2m1 times a power of two: all exact in fp32), so for
// every type only the fp32 summation is left, and the one tolerance kTol covers it. Its error
// scales with the size of the terms summed, not with the sum, which can cancel: random e4m3 / e2m1
// codes are heavy-tailed (a few terms dominate), so for them an output's error is measured against
// max(1, |want|, ||w ∘ x||_2), the root of the sum of its squared terms (for the dense checks' ±1
// weights and inputs that is about |want| already, and those keep max(1, |want|)).
int check_linear(Random& rng, cuda::WeightType wt, int groups, int64_t in, int64_t rows,
                 const std::vector<LinearRun>& runs) {
  const int64_t out = groups * rows;
  Tensor w;
  const std::vector<uint8_t> bytes = random_weight(rng, wt, out, in, w);
  DeviceBuffer<uint8_t> d_w(bytes.size());
  upload(d_w, bytes);
  const void* dw = d_w.get();
  int failures = 0;
  for (const LinearRun& r : runs) {
    const std::vector<float> x = rng.vec(static_cast<size_t>(r.n * r.ldx), -1.0f, 1.0f);
    std::vector<float> want(static_cast<size_t>(r.n * out));
    for (int g = 0; g < groups; ++g) {
      Tensor wg({rows, in}, std::vector<float>(w.data.begin() + g * rows * in, w.data.begin() + (g + 1) * rows * in));
      std::vector<float> packed(static_cast<size_t>(r.n * in)), yg(static_cast<size_t>(r.n * rows));
      for (int t = 0; t < r.n; ++t) std::copy_n(x.begin() + t * r.ldx + r.xo + g * in, in, packed.begin() + t * in);
      frank::cpu::linear(packed.data(), r.n, wg, yg.data());
      for (int t = 0; t < r.n; ++t) std::copy_n(yg.begin() + t * rows, rows, want.begin() + t * out + g * rows);
    }

    DeviceBuffer<float> d_x(x.size()), d_y(static_cast<size_t>(r.n * r.ldy));
    upload(d_x, x);
    poison(d_y);
    finish(groups == 1 ? cuda::linear(d_x.get() + r.xo, r.ldx, r.n, dw, wt, out, in, d_y.get() + r.yo, r.ldy, nullptr)
                       : cuda::linear_grouped(d_x.get() + r.xo, r.ldx, r.n, dw, wt, groups, rows, in, d_y.get() + r.yo,
                                              r.ldy, nullptr));
    const std::vector<float> y = download(d_y);
    std::vector<float> got(want.size());
    bool untouched = true;
    for (int t = 0; t < r.n; ++t)
      for (int64_t c = 0; c < r.ldy; ++c) {
        const float v = y[t * r.ldy + c];
        if (c >= r.yo && c < r.yo + out) {
          got[t * out + c - r.yo] = v;
        } else {
          uint32_t u;
          std::memcpy(&u, &v, 4);
          untouched &= u == 0xffffffffu;
        }
      }
    const double err =
        untouched ? linear_error(wt, got, want, w, r.n, [&](int t, int64_t o) {
          return x.data() + t * r.ldx + r.xo + o / rows * in;
        })
                  : INFINITY;
    failures +=
        report(groups == 1 ? "linear" : "linear_grouped",
               format("%s %dx%lld->%lld n=%d ldx=%lld+%lld ldy=%lld+%lld", cuda::weight_type_name(wt), groups,
                      static_cast<long long>(in), static_cast<long long>(rows), r.n, static_cast<long long>(r.ldx),
                      static_cast<long long>(r.xo), static_cast<long long>(r.ldy), static_cast<long long>(r.yo))
                   .c_str(),
               err, kTol);
  }
  return failures;
}

// linears: several random weights of type wt (random_weight, [outs[s], in]) on one x in one
// launch; output s must be cpu::linear of its weight, within check_linear's measure.
int check_linears(Random& rng, cuda::WeightType wt, int64_t in, const std::vector<int64_t>& outs, int n) {
  const std::vector<float> x = rng.vec(static_cast<size_t>(n * in), -1.0f, 1.0f);
  DeviceBuffer<float> d_x(x.size());
  upload(d_x, x);
  std::deque<DeviceBuffer<uint8_t>> d_w;  // a deque: buffers do not move (nor copy)
  std::deque<DeviceBuffer<float>> d_y;
  std::vector<Tensor> ws(outs.size());
  std::vector<cuda::LinearOutput> outputs;
  for (size_t s = 0; s < outs.size(); ++s) {
    const std::vector<uint8_t> bytes = random_weight(rng, wt, outs[s], in, ws[s]);
    upload(d_w.emplace_back(bytes.size()), bytes);
    poison(d_y.emplace_back(static_cast<size_t>(n * outs[s])));
    outputs.push_back({d_w.back().get(), outs[s], d_y.back().get(), outs[s]});
  }
  finish(cuda::linears(d_x.get(), in, n, in, wt, outputs.data(), static_cast<int>(outputs.size()), nullptr));
  double err = 0.0;
  for (size_t s = 0; s < outs.size(); ++s) {
    std::vector<float> want(static_cast<size_t>(n * outs[s]));
    frank::cpu::linear(x.data(), n, ws[s], want.data());
    err = std::max(err, linear_error(wt, download(d_y[s]), want, ws[s], n,
                                     [&](int t, int64_t) { return x.data() + t * in; }));
  }
  const long long columns = in;
  const std::string what =
      format("%s %zu outputs of %lld n=%d", cuda::weight_type_name(wt), outs.size(), columns, n);
  return report("linears", what.c_str(), err, kTol);
}

// FP8 (blocks of 128 and 32) and FP4 weights on the same paths, n = 1..8 (one pass) and 13 (two).
// FP8: 37 -> 19 and 1032 -> 293 (rows of 1032 bytes are not 16-byte multiples) take the scalar
// path over partial blocks; 1040 -> 293 the 16-byte path with a partial last block of columns and
// of rows; 4096 -> 512 8 parts, 8192 -> 4096 4, 1024 -> 8192 2. FP4: 96 -> 19 one part of 3
// chunks, the rest as FP8. Unaligned x slices and groups of 5 rows take the scalar path; the
// grouped output projection (8 x 1024 rows over 4096) the 16-byte one, its FP8 blocks spanning
// the whole matrix as shipped.
int check_quantized_linear_all(Random& rng) {
  int failures = 0;
  // Every n on the smaller shapes; on the two largest (the reference's double loop is the slow part)
  // one of each token pass: 1, 3 (in a pass of 4), 8, 13.
  const auto runs_for = [](int64_t in, int64_t out) {
    std::vector<LinearRun> runs;
    for (int n : {1, 2, 3, 4, 5, 6, 7, 8, 13})
      if (in * out < 8'000'000 || n == 1 || n == 3 || n == 8 || n == 13) runs.push_back({n, in, 0, out, 0});
    return runs;
  };
  for (cuda::WeightType wt :
       {cuda::WeightType::Fp8Block128, cuda::WeightType::Fp8Block32, cuda::WeightType::Fp4}) {
    const bool fp4 = wt == cuda::WeightType::Fp4;
    const std::vector<std::pair<int64_t, int64_t>> shapes =
        fp4 ? std::vector<std::pair<int64_t, int64_t>>{{96, 19}, {4096, 512}, {1024, 293}, {8192, 4096}, {1024, 8192}}
            : std::vector<std::pair<int64_t, int64_t>>{{37, 19},    {1032, 293},  {1040, 293},
                                                       {4096, 512}, {8192, 4096}, {1024, 8192}};
    for (auto [in, out] : shapes) failures += check_linear(rng, wt, 1, in, out, runs_for(in, out));
    const int64_t small_in = fp4 ? 64 : 48;
    failures += check_linear(rng, wt, 1, small_in, 19, {{3, small_in + 8, 5, 23, 2}, {8, small_in, 0, 19, 0}});
    failures += check_linear(rng, wt, 8, 4096, 1024, {{1, 32768, 0, 8192, 0}, {8, 32768, 0, 8192, 0}});
    failures += check_linear(rng, wt, 2, small_in, 5, {{3, 2 * small_in + 3, 3, 11, 1}, {8, 2 * small_in, 0, 10, 0}});
  }
  return failures;
}

// Shapes pick the kernel's paths: `in` split in 8 parts (4096 -> 512 or 1024), 4 (8192 -> 4096),
// 2 (1024 -> 8192), 1 (1024 -> 32768); 1032 -> 293 has a short last part (bf16: 2 parts) or an
// empty one (fp32: 4), a last warp with rows past the end and (bf16) a last block with idle warps.
// Token counts 1, 2, 4, 8 (and 3: 4 with one unused) take one pass, 13 two; unaligned slices and
// groups of rows not a multiple of 4 take the scalar path.
int check_linear_all(Random& rng) {
  int failures = 0;
  for (cuda::WeightType wt : {cuda::WeightType::F32, cuda::WeightType::BF16}) {
    for (auto [in, out] : {std::pair<int64_t, int64_t>{37, 19},
                           {4096, 512},
                           {4096, 1024},
                           {8192, 4096},
                           {1024, 8192},
                           {1032, 293},
                           {1024, 32768}}) {
      std::vector<LinearRun> runs;
      for (int n : {1, 2, 3, 4, 8, 13}) runs.push_back({n, in, 0, out, 0});
      failures += check_linear(rng, wt, 1, in, out, runs);
    }
    // A slice of the output projection's input, columns 3*4096.. of [n, 32768], written to columns
    // 5*1024.. of [n, 8192]. Then an odd slice (unaligned rows: the scalar path).
    failures +=
        check_linear(rng, wt, 1, 4096, 1024, {{3, 32768, 3 * 4096, 8192, 5 * 1024}, {13, 32768, 0, 8192, 7 * 1024}});
    failures += check_linear(rng, wt, 1, 37, 19, {{3, 45, 5, 23, 2}, {9, 45, 8, 19, 0}});
    // The grouped output projection: 8 groups of 1024 rows over [n, 32768] into [n, 8192], then
    // inside wider rows. Small groups on the 16-byte path (and, x unaligned, the scalar one), and
    // groups of 5 rows (the scalar path).
    failures += check_linear(
        rng, wt, 8, 4096, 1024,
        {{1, 32768, 0, 8192, 0}, {4, 32768, 0, 8192, 0}, {13, 32768, 0, 8192, 0}, {3, 32768 + 8, 4, 8192 + 7, 3}});
    failures += check_linear(rng, wt, 3, 40, 12,
                             {{1, 120, 0, 36, 0}, {5, 128, 8, 40, 4}, {13, 120, 0, 36, 0}, {2, 125, 1, 36, 0}});
    failures += check_linear(rng, wt, 2, 37, 5, {{3, 80, 3, 11, 1}, {9, 74, 0, 10, 0}});
  }
  // A CSA layer's projections of its input (q_a, kv, the compressor's kv and gate, the indexer's
  // kv, gate and head weights), a sliding layer's two, and odd rows on the scalar path.
  for (cuda::WeightType wt : {cuda::WeightType::F32, cuda::WeightType::BF16, cuda::WeightType::Fp8Block128,
                               cuda::WeightType::Fp8Block32, cuda::WeightType::Fp4})
    for (int n : {1, 3, 8, 13}) {
      failures += check_linears(rng, wt, 4096, {1024, 512, 1024, 1024, 256, 256, 64}, n);
      failures += check_linears(rng, wt, 4096, {1024, 512}, n);
      // Odd rows, on the scalar path for the dense types (FP4 needs `in` a multiple of 32).
      failures += check_linears(rng, wt, wt == cuda::WeightType::Fp4 ? 64 : 37, {19, 5, 33}, n);
    }
  // The head: vocab x hidden (bf16 only: 1 GB of weights).
  failures +=
      check_linear(rng, cuda::WeightType::BF16, 1, 4096, 129280, {{1, 4096, 0, 129280, 0}, {3, 4096, 0, 129280, 0}});
  failures += check_quantized_linear_all(rng);
  // Arguments outside the contract of linear_grouped are refused before any launch.
  DeviceBuffer<float> d(4096);
  float* p = d.get();
  const auto refused = [](const char* what, cudaError_t e) {
    return report("linear_grouped", what, e == cudaErrorInvalidValue ? 0.0 : 1.0, 0.0);
  };
  failures +=
      refused("groups = 0 refused", cuda::linear_grouped(p, 32, 1, p, cuda::WeightType::F32, 0, 4, 16, p, 8, nullptr));
  failures += refused("ldx < groups*in refused",
                      cuda::linear_grouped(p, 16, 1, p, cuda::WeightType::F32, 2, 4, 16, p, 8, nullptr));
  failures += refused("ldy < groups*rows refused",
                      cuda::linear_grouped(p, 32, 1, p, cuda::WeightType::F32, 2, 4, 16, p, 7, nullptr));
  return failures;
}

int check_rms_norm(Random& rng) {
  int failures = 0;
  struct Case {
    int64_t rows;
    int width;
    bool weighted;
  };
  for (const Case& c : {Case{5, 37, true}, Case{5, 37, false}, Case{8, 4096, true}, Case{3, 16384, false}}) {
    std::vector<float> x = rng.vec(static_cast<size_t>(c.rows * c.width), -2.0f, 2.0f);
    const std::vector<float> weight = rng.vec(static_cast<size_t>(c.width), 0.5f, 1.5f);
    DeviceBuffer<float> d_x(x.size()), d_w(weight.size());
    upload(d_x, x);
    upload(d_w, weight);
    finish(cuda::rms_norm(d_x.get(), c.rows, c.width, c.weighted ? d_w.get() : nullptr, 1e-6f, nullptr));
    for (int64_t r = 0; r < c.rows; ++r)
      frank::cpu::rms_norm(x.data() + r * c.width, c.width, c.weighted ? weight.data() : nullptr, 1e-6f);
    failures += report("rms_norm", format("%lld x %d %s", static_cast<long long>(c.rows), c.width,
                                          c.weighted ? "weighted" : "unweighted")
                                       .c_str(),
                       max_scaled_error(download(d_x), x), kTol);
  }
  return failures;
}

// Forward and inverse rotation of [n, heads*dim] at positions first .. first + n - 1, or with a
// stride (V4.1's groups) at (first / stride + t) * stride.
int check_rope(Random& rng, const frank::model::RopeSpec& spec, const char* spec_name, int rope_dim, int heads, int dim,
               int64_t first, int64_t stride = 1) {
  const frank::engine::RopeTable table(spec, rope_dim);
  const int n = 5, pairs = rope_dim / 2;
  DeviceBuffer<float> d_freq(pairs), d_x(static_cast<size_t>(n) * heads * dim);
  DevicePosition position;
  upload(d_freq, table.inv_freq());
  double err = 0.0;
  for (bool inverse : {false, true}) {
    std::vector<float> x = rng.vec(d_x.size(), -1.0f, 1.0f);
    upload(d_x, x);
    finish(cuda::rope(d_x.get(), n, heads, dim, d_freq.get(), pairs, position.at(first), inverse, nullptr, stride));
    for (int t = 0; t < n; ++t)
      for (int h = 0; h < heads; ++h)
        table.apply(x.data() + (int64_t{t} * heads + h) * dim, dim, (first / stride + t) * stride, inverse);
    err = std::max(err, max_scaled_error(download(d_x), x));
  }
  return report("rope", format("%s %d heads x %d, pairs %d, pos %lld stride %lld", spec_name, heads, dim, pairs,
                               static_cast<long long>(first), static_cast<long long>(stride))
                            .c_str(),
                err, kTol);
}

int check_rope_all(Random& rng) {
  const frank::model::RopeSpec plain{10000.0};
  const frank::model::RopeSpec yarn{160000.0, true, 16.0, 65536, 32.0, 1.0};
  int failures = 0;
  for (int64_t first : {int64_t{0}, int64_t{998}, int64_t{999998}}) {
    failures += check_rope(rng, plain, "plain", 64, 64, 512, first);
    failures += check_rope(rng, yarn, "yarn", 64, 64, 512, first);
  }
  failures += check_rope(rng, yarn, "yarn", 8, 3, 10, 1000);
  for (int64_t first : {int64_t{0}, int64_t{7}, int64_t{999999}}) failures += check_rope(rng, yarn, "yarn", 64, 1, 512, first, 2);
  return failures;
}

// rms_norm then rope in one launch, against cpu::rms_norm then RopeTable::apply on every head row.
int check_rms_norm_rope(Random& rng, int n, int heads, int dim, int rope_dim, bool weighted, int64_t first) {
  const frank::engine::RopeTable table(frank::model::RopeSpec{10000.0}, rope_dim);
  const int pairs = rope_dim / 2;
  std::vector<float> x = rng.vec(static_cast<size_t>(n) * heads * dim, -2.0f, 2.0f);
  const std::vector<float> weight = rng.vec(dim, 0.5f, 1.5f);
  DeviceBuffer<float> d_x(x.size()), d_freq(pairs), d_weight(dim);
  upload(d_x, x);
  upload(d_freq, table.inv_freq());
  upload(d_weight, weight);
  DevicePosition position;
  finish(cuda::rms_norm_rope(d_x.get(), n, heads, dim, weighted ? d_weight.get() : nullptr, 1e-6f, d_freq.get(), pairs,
                             position.at(first), nullptr));
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < heads; ++h) {
      float* row = x.data() + (int64_t{t} * heads + h) * dim;
      frank::cpu::rms_norm(row, dim, weighted ? weight.data() : nullptr, 1e-6f);
      table.apply(row, dim, first + t, /*inverse=*/false);
    }
  return report("rms_norm_rope",
                format("n=%d %d heads x %d, pairs %d%s", n, heads, dim, pairs, weighted ? ", weighted" : "").c_str(),
                max_scaled_error(download(d_x), x), kTol);
}

int check_scale(Random& rng) {
  std::vector<float> x = rng.vec((1 << 20) + 3, -4.0f, 4.0f);
  DeviceBuffer<float> d_x(x.size());
  upload(d_x, x);
  finish(cuda::scale(d_x.get(), static_cast<int64_t>(x.size()), -0.37f, nullptr));
  for (float& v : x) v *= -0.37f;
  return report("scale", "2^20 + 3 values", max_scaled_error(download(d_x), x), 0.0);  // one product: exact
}

int check_embed(Random& rng, int D, int N) {
  const int vocab = 1000, n = 5;
  const std::vector<float> table = rng.vec(static_cast<size_t>(vocab) * D, -1.0f, 1.0f);
  std::vector<int32_t> ids = {0, vocab - 1};
  while (static_cast<int>(ids.size()) < n) ids.push_back(static_cast<int32_t>(rng.next() % vocab));
  std::vector<float> want(static_cast<size_t>(n) * N * D);
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < N; ++j)
      std::copy_n(table.begin() + int64_t{ids[t]} * D, D, want.begin() + (int64_t{t} * N + j) * D);
  DeviceBuffer<int32_t> d_ids(ids.size());
  DeviceBuffer<float> d_table(table.size()), d_streams(want.size());
  upload(d_ids, ids);
  upload(d_table, table);
  poison(d_streams);
  finish(cuda::embed_streams(d_ids.get(), n, d_table.get(), D, N, d_streams.get(), nullptr));
  return report("embed_streams", format("D=%d N=%d n=%d", D, N, n).c_str(), max_scaled_error(download(d_streams), want),
                0.0);  // a copy: exact
}

// hc_pre (mix and input) and then hc_post (with the reference's mix) on one set of streams.
int check_hc_site(Random& rng, int N, int D, int n) {
  const auto c = hc_config(N, D);
  const int M = (2 + N) * N;
  const int64_t K = int64_t{N} * D;
  const auto w = make_hc_weights(rng, N, D, M, 3);
  const std::vector<float> norm = rng.vec(D, 0.5f, 1.5f);
  const std::vector<float> streams = rng.vec(static_cast<size_t>(n * K), -1.0f, 1.0f);
  const std::vector<float> sublayer = rng.vec(static_cast<size_t>(n) * D, -1.0f, 1.0f);

  std::vector<float> want_mix, want_input(static_cast<size_t>(n) * D), want_streams = streams;
  for (int t = 0; t < n; ++t) {
    const auto mix = frank::engine::hc_mapping(c, w, streams.data() + t * K);
    for (const auto* part : {&mix.pre, &mix.post, &mix.comb})
      want_mix.insert(want_mix.end(), part->begin(), part->end());
    float* in = want_input.data() + int64_t{t} * D;
    frank::engine::collapse_streams(streams.data() + t * K, mix.pre, D, in);
    frank::cpu::rms_norm(in, D, norm.data(), c.rms_norm_eps);
    frank::engine::hc_expand(mix, sublayer.data() + int64_t{t} * D, D, want_streams.data() + t * K);
  }

  DeviceBuffer<float> d_streams(streams.size()), d_fn(w.fn.data.size()), d_base(M), d_scale(3), d_norm(D);
  DeviceBuffer<float> d_mix(want_mix.size()), d_input(want_input.size()), d_sub(sublayer.size());
  upload(d_streams, streams);
  upload(d_fn, w.fn.data);
  upload(d_base, w.base.data);
  upload(d_scale, w.scale.data);
  upload(d_norm, norm);
  upload(d_sub, sublayer);
  auto run_pre = [&] {
    poison(d_mix);
    poison(d_input);
    finish(cuda::hc_pre(d_streams.get(), n, N, D, d_fn.get(), d_base.get(), d_scale.get(), c.hc_sinkhorn_iters,
                        c.hc_eps, c.rms_norm_eps, d_norm.get(), d_mix.get(), d_input.get(), nullptr));
    return std::vector<std::vector<float>>{download(d_mix), download(d_input)};
  };
  const auto got = run_pre();
  const std::string shape = format("N=%d D=%d n=%d", N, D, n);
  int failures = report("hc_pre", (shape + " mix").c_str(), max_scaled_error(got[0], want_mix), kTol);
  failures += report("hc_pre", (shape + " input").c_str(), max_scaled_error(got[1], want_input), kTol);
  failures += check_rerun("hc_pre", shape, got, run_pre());

  // hc_post gets the reference's mix, so its check does not depend on hc_pre's.
  upload(d_mix, want_mix);
  finish(cuda::hc_post(d_streams.get(), n, N, D, d_mix.get(), d_sub.get(), nullptr));
  failures += report("hc_post", shape.c_str(), max_scaled_error(download(d_streams), want_streams), kTol);
  return failures;
}

int check_hc_head(Random& rng, int N, int D, int n) {
  const auto c = hc_config(N, D);
  const int64_t K = int64_t{N} * D;
  const auto w = make_hc_weights(rng, N, D, N, 1);
  const std::vector<float> norm = rng.vec(D, 0.5f, 1.5f);
  const std::vector<float> streams = rng.vec(static_cast<size_t>(n * K), -1.0f, 1.0f);
  std::vector<float> want(static_cast<size_t>(n) * D);
  for (int t = 0; t < n; ++t) {
    frank::engine::hyper_head(c, w, streams.data() + t * K, want.data() + int64_t{t} * D);
    frank::cpu::rms_norm(want.data() + int64_t{t} * D, D, norm.data(), c.rms_norm_eps);
  }
  DeviceBuffer<float> d_streams(streams.size()), d_fn(w.fn.data.size()), d_base(N), d_scale(1), d_norm(D);
  DeviceBuffer<float> d_out(want.size());
  upload(d_streams, streams);
  upload(d_fn, w.fn.data);
  upload(d_base, w.base.data);
  upload(d_scale, w.scale.data);
  upload(d_norm, norm);
  auto run_head = [&] {
    poison(d_out);
    finish(cuda::hc_head(d_streams.get(), n, N, D, d_fn.get(), d_base.get(), d_scale.get(), c.hc_eps,
                         c.rms_norm_eps, d_norm.get(), d_out.get(), nullptr));
    return std::vector<std::vector<float>>{download(d_out)};
  };
  const auto got = run_head();
  const std::string shape = format("N=%d D=%d n=%d", N, D, n);
  return report("hc_head", shape.c_str(), max_scaled_error(got[0], want), kTol) +
         check_rerun("hc_head", shape, got, run_head());
}

// Arguments outside the contract are refused before any launch.
int check_bad_arguments() {
  DeviceBuffer<float> d(4096);
  float* p = d.get();
  auto refused = [](const char* op, const char* what, cudaError_t e) {
    return report(op, what, e == cudaErrorInvalidValue ? 0.0 : 1.0, 0.0);
  };
  int failures =
      refused("linear", "ldx < in refused", cuda::linear(p, 8, 1, p, cuda::WeightType::F32, 4, 16, p, 4, nullptr));
  failures += refused("linear", "unknown weight type refused",
                      cuda::linear(p, 16, 1, p, static_cast<cuda::WeightType>(7), 4, 16, p, 4, nullptr));
  failures += refused("linear", "fp4 with in % 32 != 0 refused",
                      cuda::linear(p, 48, 1, p, cuda::WeightType::Fp4, 4, 48, p, 4, nullptr));
  DevicePosition position;
  failures += refused("rope", "2*pairs > dim refused", cuda::rope(p, 1, 1, 6, p, 4, position.at(0), false, nullptr));
  failures += refused("rope", "no position refused", cuda::rope(p, 1, 1, 8, p, 4, nullptr, false, nullptr));
  failures += refused("rms_norm_rope", "pairs > 256 refused",
                      cuda::rms_norm_rope(p, 1, 1, 1024, p, 1e-6f, p, 257, position.at(0), nullptr));
  failures += refused("hc_pre", "N = 9 refused",
                      cuda::hc_pre(p, 1, 9, 16, p, p, p, 20, 1e-6f, 1e-6f, p, p, p, nullptr));
  failures += refused("hc_head", "D < N refused", cuda::hc_head(p, 1, 4, 2, p, p, p, 1e-6f, 1e-6f, p, p, nullptr));
  return failures;
}

}  // namespace

int check_dense_ops(uint64_t seed) {
  Random rng(seed);
  int failures = check_bad_arguments();
  failures += check_linear_all(rng);
  failures += check_rms_norm(rng);
  failures += check_rope_all(rng);
  failures += check_scale(rng);
  // q (64 heads, unweighted) and kv (one weighted head) at the real shape; an odd toy row; all of
  // a row rotated.
  failures += check_rms_norm_rope(rng, 3, 64, 512, 64, false, 70000);
  failures += check_rms_norm_rope(rng, 3, 1, 512, 64, true, 70000);
  failures += check_rms_norm_rope(rng, 2, 3, 13, 6, true, 5);
  failures += check_rms_norm_rope(rng, 1, 2, 8, 8, false, 0);
  failures += check_embed(rng, 37, 3) + check_embed(rng, 4096, 4);
  // Hyper-connections. Small shapes take the code paths the real one does not: unaligned K and D
  // (one float per lane), D < (N+1)^2 and D = N (no room for split partials: one split, the
  // finishing block sums the squares), N = 8 (several column steps per lane and row groups per
  // warp in the partials, the largest Sinkhorn, 2 token groups finished by their own last
  // blocks), D = 4099 and 4352 (more collapse values than a collapsing thread keeps in registers,
  // one float and 16 bytes at a time). The reruns also show that every launch leaves its arrival
  // counters ready for the next.
  failures += check_hc_site(rng, 2, 37, 3);
  failures += check_hc_head(rng, 2, 37, 3);
  failures += check_hc_site(rng, 4, 16, 2);
  failures += check_hc_head(rng, 3, 3, 2);
  failures += check_hc_site(rng, 8, 1024, 9);
  failures += check_hc_site(rng, 2, 4099, 2);
  failures += check_hc_head(rng, 2, 4099, 2);
  failures += check_hc_site(rng, 2, 4352, 1);
  failures += check_hc_head(rng, 2, 4352, 1);
  for (int n : {1, 3, 8, 13, 300}) {  // decode, verify, prefill
    failures += check_hc_site(rng, 4, 4096, n);
    failures += check_hc_head(rng, 4, 4096, n);
  }
  return failures;
}

}  // namespace frank_test
