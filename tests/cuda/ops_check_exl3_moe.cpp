// moe_experts with EXL3 routed experts kept packed (frank/cuda/ops.cuh, exl3_moe.cuh) against
// engine::moe_forward on the same weights (the CPU's EXL3 linear), weights applied before down as
// the GPU does (MoeVariant::weight_before_down; the order of every other operation is the
// reference's). At K = 2, 3, 4 with each codebook, and gate, up and down of different bits with
// codebooks differing between experts; a bf16 or FP8 shared expert (the second pass of the FP8 /
// bf16 kernels); n = 1, 2, 5, 8 tokens; small shapes and DeepSeek-V4-Flash's (D 4096, I 2048) and
// V4.1's (D 5120, I 2304) expert shapes. Every bound is derived from the data (doubles, eps = 2^-24,
// γ_m = m eps / (1 - m eps)); a check passes when |err| / bound <= 1.
//
// Stage checks (every shape; compare_stages): the routed pass alone, its scratch read back — gate
// and up within the EXL3 GEMV bound (exl3_bound.h: the same input, sums in another order), down on
// the GPU's own h within that bound, the routed sum bit for bit in the reference's order, the
// shared expert's pass within its dense bound. For all n_max tokens; for fewer, the routed pass
// must give the same bits as the first tokens' in that pass (every slot is computed on its own),
// and the shared expert's pass is checked again. A wrong expert, tile order or sum order fails
// them at every shape; one wrong tile at small shapes (the GEMV bound grows with k: at D = 4096 it
// is about a quarter of |y|, test_cuda_exl3.cpp shows its teeth at 256 x 512).
//
// The whole output (small shapes, where it resolves a wrong tile: the check that it does runs on
// the host), per output (t, d):
//   - each EXL3 GEMV: exl3_gemv_bound; gate and up on the same x, down on inputs h that differ by Δh;
//   - Δh_i from the bounds Bg, Bu of gate and up: silu is 1.1-Lipschitz, min and clamp 1-Lipschitz,
//     so |Δ(silu(min g) clamp u)| <= 1.1 Bg |clamp u| + |silu(min g)| Bu + 1.1 Bg Bu, times |w|;
//     plus each side's own roundings of h (expf within 2 ulp, 5 more roundings: 16 eps of |h|);
//   - the routed sum, the same order on both sides: sum of the slots' Δy plus 2 γ_k sum |y|;
//   - the shared expert (dense fp32 values: bf16 or FP8 decoded exactly), summed in fp32 in any
//     order on either side: 2 γ_cols sum |w x| per GEMV, Δh as above, and down's Δh carried by |W|;
//   - the final add of the shared expert: 2 eps of the magnitudes.
// |y| and |h| are taken as the CPU's plus their bound (a bound on both sides' magnitudes). Worst
// case throughout, it is loose (about 0.4 |y| at D = 256, I = 128; over |y| from D = 384 on), but
// holds: the CPU's distance from an exact (double) evaluation stays below 1e-5 of it.
//
// Also: the last n reruns eagerly and as a CUDA graph for the same bits; bits outside 1..8 and an
// EXL3 shared expert are refused before anything runs.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda_util.h"
#include "exl3_bound.h"
#include "frank/core/dtype.h"
#include "frank/cpu/ops.h"
#include "frank/cpu/quant/exl3_matrix.h"
#include "frank/cpu/quantized_linear.h"
#include "frank/cuda/exl3_gemv.h"
#include "frank/cuda/exl3_moe.cuh"
#include "frank/cuda/native_weight.h"
#include "frank/cuda/ops.cuh"
#include "frank/engine/moe.h"
#include "ops_check.h"
#include "ops_check_moe.h"

namespace frank_test {
namespace {

using frank::Exl3Codebook;
using frank::LinearWeight;
using frank::model::ExpertWeights;

constexpr double kEps = 0x1p-24;

int64_t padded(int64_t features) { return (features + 127) / 128 * 128; }

// A [rows, cols] EXL3 weight: random trellis words (every word is valid), suh of random signs
// times uniform(0.5, 1.5), svh the same times `scale`. The codebooks' values have about unit
// variance and H is orthonormal, so an output has a standard deviation of about 1.08 scale |x|.
LinearWeight random_exl3(Rng& r, int64_t rows, int64_t cols, int bits, Exl3Codebook codebook, float scale) {
  frank::QuantizedMatrix q;
  q.format = frank::QuantizedMatrix::Format::Exl3;
  q.rows = rows, q.cols = cols, q.bits = bits, q.codebook = codebook;
  q.trellis.resize(static_cast<size_t>(padded(rows) * padded(cols) * bits / 16));
  for (uint16_t& w : q.trellis) w = static_cast<uint16_t>(r.g() >> 48);
  const auto sign_vector = [&](int64_t count, float s) {
    std::vector<uint16_t> v(static_cast<size_t>(count));
    for (uint16_t& h : v) h = frank::f32_to_f16((r.below(2) ? -s : s) * r.uniform(0.5f, 1.5f));
    return v;
  };
  q.suh = sign_vector(padded(cols), 1.0f);
  q.svh = sign_vector(padded(rows), scale);
  LinearWeight w;
  w.quantized = std::move(q);
  return w;
}

// The matrix's values in fp32 [rows, cols] (exact for dense and FP8; EXL3's fp32 decoding).
std::vector<float> values_of(const LinearWeight& w) {
  return w.quantized ? frank::cpu::dequantize(*w.quantized) : w.dense.data;
}

frank::cpu::Exl3Matrix exl3_of(const LinearWeight& w) { return frank::cpu::exl3_view(*w.quantized); }

// What the CPU computes for one expert on one token and the bound on the GPU's distance from it.
struct ExpertRun {
  std::vector<float> y;      // the expert's output (weight applied before down)
  std::vector<double> bound;  // |y_gpu - y|
};

// Δh and h (both from the CPU's g, u) for one expert's hidden layer.
void hidden_bound(const std::vector<float>& g, const std::vector<float>& u, const std::vector<double>& bg,
                  const std::vector<double>& bu, float limit, float weight, std::vector<float>& h,
                  std::vector<double>& dh) {
  h.resize(g.size()), dh.resize(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const float sg = frank::cpu::silu(std::min(g[i], limit)), cu = std::clamp(u[i], -limit, limit);
    h[i] = sg * cu;
    if (weight != 1.0f) h[i] *= weight;
    const double dg = 1.1 * bg[i];
    const double d = std::abs(weight) * (dg * std::abs(cu) + std::abs(sg) * bu[i] + dg * bu[i]);
    dh[i] = d + 2 * 16 * kEps * (std::abs(static_cast<double>(h[i])) + d);
  }
}

// A dense (bf16 / FP8) GEMV's bound, both sides fp32 sums in any order: 2 γ_cols sum_j |W_rj| (|x_j|
// + dx_j), plus sum_j |W_rj| dx_j (the inputs' difference carried).
std::vector<double> dense_bound(const std::vector<float>& w, int64_t rows, int64_t cols, const std::vector<float>& x,
                                const std::vector<double>* dx) {
  const double gamma = frank_test::exl3_gamma(static_cast<double>(cols));
  std::vector<double> bound(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double magnitude = 0, carried = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const double a = std::abs(static_cast<double>(w[r * cols + j])), d = dx ? (*dx)[j] : 0.0;
      magnitude += a * (std::abs(x[j]) + d), carried += a * d;
    }
    bound[r] = 2 * gamma * magnitude + carried;
  }
  return bound;
}

// The CPU's shared expert on token x and its bound; wg, wu, wd its matrices' values.
ExpertRun shared_run(const ExpertWeights& e, const std::vector<float>& wg, const std::vector<float>& wu,
                     const std::vector<float>& wd, const float* x, int D, int I, float limit) {
  const std::vector<float> xt(x, x + D);
  std::vector<float> g(I), u(I), h;
  frank::cpu::linear(x, 1, e.gate, g.data());
  frank::cpu::linear(x, 1, e.up, u.data());
  std::vector<double> dh;
  hidden_bound(g, u, dense_bound(wg, I, D, xt, nullptr), dense_bound(wu, I, D, xt, nullptr), limit, 1.0f, h, dh);
  ExpertRun run{std::vector<float>(D), {}};
  frank::cpu::linear(h.data(), 1, e.down, run.y.data());
  run.bound = dense_bound(wd, D, I, h, &dh);
  return run;
}

// The CPU's routed expert `e` on the tokens `xs` [m, D] with weights `ws` (weight before down), and
// the bounds of its EXL3 GEMVs.
std::vector<ExpertRun> routed_runs(const ExpertWeights& e, const std::vector<float>& xs,
                                   const std::vector<float>& ws, int D, int I, float limit) {
  const int m = static_cast<int>(ws.size());
  std::vector<float> g(static_cast<size_t>(m) * I), u(g.size());
  frank::cpu::linear(xs.data(), m, e.gate, g.data());
  frank::cpu::linear(xs.data(), m, e.up, u.data());
  const std::vector<double> bg = exl3_gemv_bound(exl3_of(e.gate), xs.data(), nullptr, m);
  const std::vector<double> bu = exl3_gemv_bound(exl3_of(e.up), xs.data(), nullptr, m);
  std::vector<float> hs;
  std::vector<double> dhs;
  for (int t = 0; t < m; ++t) {
    const auto part = [&](const auto& v) { return std::vector(v.begin() + t * I, v.begin() + (t + 1) * I); };
    std::vector<float> h;
    std::vector<double> dh;
    hidden_bound(part(g), part(u), part(bg), part(bu), limit, ws[t], h, dh);
    hs.insert(hs.end(), h.begin(), h.end());
    dhs.insert(dhs.end(), dh.begin(), dh.end());
  }
  std::vector<float> y(static_cast<size_t>(m) * D);
  frank::cpu::linear(hs.data(), m, e.down, y.data());
  const std::vector<double> by = exl3_gemv_bound(exl3_of(e.down), hs.data(), dhs.data(), m);
  std::vector<ExpertRun> runs;
  for (int t = 0; t < m; ++t)
    runs.push_back({std::vector(y.begin() + t * D, y.begin() + (t + 1) * D),
                    std::vector(by.begin() + t * D, by.begin() + (t + 1) * D)});
  return runs;
}

// The slots (t*k + j) that chose each expert, by expert id.
std::vector<std::pair<int32_t, std::vector<int>>> slots_by_expert(const std::vector<int32_t>& experts, int slots) {
  std::vector<std::pair<int32_t, std::vector<int>>> by;
  for (int s = 0; s < slots; ++s) {
    auto it = std::find_if(by.begin(), by.end(), [&](const auto& p) { return p.first == experts[s]; });
    if (it == by.end()) it = by.insert(by.end(), {experts[s], {}});
    it->second.push_back(s);
  }
  return by;
}

// The rows of x [.., D] of the slots' tokens.
std::vector<float> token_rows(const std::vector<float>& x, const std::vector<int>& slots, int k, int D) {
  std::vector<float> xs;
  for (int s : slots) xs.insert(xs.end(), x.begin() + (s / k) * D, x.begin() + (s / k + 1) * D);
  return xs;
}

// The CPU's shared expert on each token of x [n, D], with its bound.
std::vector<ExpertRun> shared_runs(const ExpertWeights& shared, const std::vector<float>& x, int n, int D, int I,
                                   float limit) {
  const std::vector<float> wg = values_of(shared.gate), wu = values_of(shared.up), wd = values_of(shared.down);
  std::vector<ExpertRun> runs;
  for (int t = 0; t < n; ++t) runs.push_back(shared_run(shared, wg, wu, wd, x.data() + t * D, D, I, limit));
  return runs;
}

// The bound of every output [n, D] of moe_experts on these weights and routing (`shared`: the
// shared expert's runs).
std::vector<double> moe_bound(const frank::model::MoeWeights& w, const std::vector<float>& x, int n, int D, int I,
                              int k, const std::vector<int32_t>& experts, const std::vector<float>& weights,
                              float limit, const std::vector<ExpertRun>& shared) {
  // Each used expert once, on all the slots that chose it.
  std::vector<std::vector<ExpertRun>> slot_runs(static_cast<size_t>(n) * k);
  for (const auto& [e, slots] : slots_by_expert(experts, n * k)) {
    std::vector<float> ws;
    for (int s : slots) ws.push_back(weights[s]);
    std::vector<ExpertRun> runs = routed_runs(w.experts[e], token_rows(x, slots, k, D), ws, D, I, limit);
    for (size_t i = 0; i < slots.size(); ++i) slot_runs[slots[i]].push_back(std::move(runs[i]));
  }
  std::vector<double> bound(static_cast<size_t>(n) * D);
  const double gamma_k = exl3_gamma(k);
  for (int t = 0; t < n; ++t)
    for (int d = 0; d < D; ++d) {
      double routed = 0, routed_bound = 0, magnitudes = 0;
      for (int j = 0; j < k; ++j) {
        const ExpertRun& r = slot_runs[t * k + j].front();
        routed += r.y[d], routed_bound += r.bound[d], magnitudes += std::abs(r.y[d]) + r.bound[d];
      }
      routed_bound += 2 * gamma_k * magnitudes;
      const ExpertRun& sh = shared[t];
      bound[t * D + d] = routed_bound + sh.bound[d] +
                         2 * kEps * (std::abs(routed) + routed_bound + std::abs(sh.y[d]) + sh.bound[d]);
    }
  return bound;
}

// Largest |got - want| / bound (NaN when a value is NaN: it fails).
double worst_ratio(const std::vector<float>& got, const std::vector<float>& want, const std::vector<double>& bound) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double ratio = std::abs(static_cast<double>(got[i]) - want[i]) / bound[i];
    if (!(ratio <= worst)) worst = ratio;
  }
  return worst;
}

// The EXL3 parts of the used routed experts on the device, with a device array of their
// Exl3DeviceMatrix [3][E] that the tables point into.
struct DeviceExperts {
  std::vector<std::unique_ptr<DeviceBuffer<uint16_t>>> parts;
  std::unique_ptr<DeviceBuffer<frank::cuda::Exl3DeviceMatrix>> matrices;
  std::vector<std::unique_ptr<DeviceBuffer<uint8_t>>> shared_bytes;
  std::unique_ptr<DeviceBuffer<const void*>> tables[3];
};

void upload_experts(DeviceExperts& d, const frank::model::MoeWeights& w, const std::vector<int32_t>& pool, int E,
                    WeightType shared_type) {
  std::vector<frank::cuda::Exl3DeviceMatrix> matrices(3 * static_cast<size_t>(E));
  std::vector<const void*> entries[3];
  for (auto& t : entries) t.assign(E + 1, nullptr);
  d.matrices = std::make_unique<DeviceBuffer<frank::cuda::Exl3DeviceMatrix>>(matrices.size());
  for (int32_t e : pool) {
    const LinearWeight* roles[3] = {&w.experts[e].gate, &w.experts[e].up, &w.experts[e].down};
    for (int r = 0; r < 3; ++r) {
      const frank::QuantizedMatrix& q = *roles[r]->quantized;
      std::vector<uint16_t> all = q.trellis;
      all.insert(all.end(), q.suh.begin(), q.suh.end());
      all.insert(all.end(), q.svh.begin(), q.svh.end());
      d.parts.push_back(upload(all));
      const uint16_t* p = d.parts.back()->get();
      const size_t words = q.trellis.size();
      matrices[r * E + e] = {p, p + words, p + words + q.suh.size(), q.rows, q.cols, q.bits, q.codebook};
      entries[r][e] = d.matrices->get() + r * E + e;
    }
  }
  CUDA_OK(cudaMemcpy(d.matrices->get(), matrices.data(), matrices.size() * sizeof(matrices[0]),
                     cudaMemcpyHostToDevice));
  const LinearWeight* shared[3] = {&w.shared.gate, &w.shared.up, &w.shared.down};
  for (int r = 0; r < 3; ++r) {
    if (frank::cuda::is_quantized(shared_type)) {
      d.shared_bytes.push_back(upload(frank::cuda::native_bytes(*shared[r]->quantized)));
    } else {  // bf16: the values are bf16 already
      std::vector<uint8_t> bytes;
      for (float v : shared[r]->dense.data) {
        const uint32_t b = std::bit_cast<uint32_t>(v) >> 16;
        bytes.push_back(static_cast<uint8_t>(b)), bytes.push_back(static_cast<uint8_t>(b >> 8));
      }
      d.shared_bytes.push_back(upload(bytes));
    }
    entries[r][E] = d.shared_bytes.back()->get();
    d.tables[r] = upload(entries[r]);
  }
}

// The bits of gate, up, down and the codebooks of a case; `mixed_codebooks`: expert i of the pool
// takes codebook i mod 3 (the tables allow any per expert).
struct Exl3Case {
  int bits[3];
  Exl3Codebook codebook;
  bool mixed_codebooks;
};

const char* codebook_name(Exl3Codebook c) {
  return c == Exl3Codebook::Mcg ? "mcg" : c == Exl3Codebook::Mul1 ? "mul1" : "3inst";
}

// Flips every bit of one tile of `w` (a misread tile or wrong lane states would give such errors).
void corrupt_tile(LinearWeight& w, size_t tile) {
  frank::QuantizedMatrix& q = *w.quantized;
  const size_t words = static_cast<size_t>(16 * q.bits);
  for (size_t j = tile * words; j < (tile + 1) * words; ++j) q.trellis[j] ^= 0xFFFFu;
}

// One shape's routing: tokens choose k distinct experts of a pool (hash routing).
struct MoeCase {
  frank::model::ModelConfig c;
  frank::model::MoeWeights w;
  frank::Tensor x;
  std::vector<int32_t> pool, tokens, experts;
  std::vector<float> weights;
  int D, I, E, k, n;
  float limit = 10.0f;
};

MoeCase make_case(Rng& r, int D, int I, int E, int k, int pool_size, int n) {
  MoeCase m;
  m.D = D, m.I = I, m.E = E, m.k = k, m.n = n;
  m.c.hidden_size = D, m.c.n_routed_experts = E, m.c.experts_per_token = k, m.c.moe_intermediate_size = I;
  m.c.swiglu_limit = m.limit, m.c.routed_scaling_factor = 1.5f;
  m.w.router = frank::Tensor({int64_t{E}, int64_t{D}});
  m.w.experts.resize(E);
  std::vector<int32_t> all(E);
  std::iota(all.begin(), all.end(), 0);
  m.pool = draw_experts(r, all, pool_size, true);
  for (int t = 0; t < n; ++t)
    for (int32_t e : draw_experts(r, m.pool, k, true)) m.w.tid2eid.push_back(e);
  m.x = frank::Tensor({int64_t{n}, int64_t{D}});
  for (float& v : m.x.data) v = r.uniform(-1.0f, 1.0f);
  m.tokens.resize(n);
  std::iota(m.tokens.begin(), m.tokens.end(), 0);
  for (int t = 0; t < n; ++t) {
    const frank::engine::Routing ro = frank::engine::route(m.c, m.w, true, m.x.row(t), m.tokens[t]);
    m.experts.insert(m.experts.end(), ro.experts.begin(), ro.experts.end());
    m.weights.insert(m.weights.end(), ro.weights.begin(), ro.weights.end());
  }
  return m;
}

// New weights for the case's pool and shared expert. Gate and up outputs of standard deviation ~6
// (x uniform in [-1, 1], |x| = sqrt(D/3)), so that the limit 10 is passed on both sides; down
// keeps the outputs of order 1.
void draw_weights(Rng& r, MoeCase& m, const Exl3Case& cs, WeightType shared_type) {
  const float a = 6.0f / (1.08f * std::sqrt(m.D / 3.0f)), b = 0.07f / std::sqrt(static_cast<float>(m.I));
  const float dense = 18.0f / std::sqrt(static_cast<float>(m.D)), dense_down = 0.2f / std::sqrt(static_cast<float>(m.I));
  for (size_t i = 0; i < m.pool.size(); ++i) {
    const Exl3Codebook cb = cs.mixed_codebooks ? static_cast<Exl3Codebook>(i % 3) : cs.codebook;
    ExpertWeights& e = m.w.experts[m.pool[i]];
    e.gate = random_exl3(r, m.I, m.D, cs.bits[0], cb, a);
    e.up = random_exl3(r, m.I, m.D, cs.bits[1], cb, a);
    e.down = random_exl3(r, m.D, m.I, cs.bits[2], cb, b);
  }
  const auto shared_matrix = [&](int64_t rows, int64_t cols, float s) -> LinearWeight {
    if (frank::cuda::is_quantized(shared_type)) return random_codes(r, shared_type, rows, cols, s);
    frank::Tensor t({rows, cols});
    for (float& v : t.data) v = round_bf16(r.uniform(-s, s));
    return t;
  };
  m.w.shared = {shared_matrix(m.I, m.D, dense), shared_matrix(m.I, m.D, dense), shared_matrix(m.D, m.I, dense_down)};
}

// The reference with the weights applied before down, as the GPU does.
frank::Tensor reference(const MoeCase& m) {
  return frank::engine::moe_forward(m.c, m.w, true, m.x, m.tokens, nullptr, frank::engine::MoeVariant{1.0f, true});
}

// Host only: the clamps reached on both sides over the routed slots, and (`teeth`) one wrong tile of
// the first token's first expert (gate, then down) moving outputs past the bound.
int host_checks(MoeCase& m, const std::string& name, const frank::Tensor& want, const std::vector<double>& bound,
                bool teeth) {  // want, bound: only with teeth
  int failures = 0;
  long clamped_g = 0, clamped_u = 0;
  for (size_t s = 0; s < m.experts.size(); ++s) {
    std::vector<float> g(m.I), u(m.I);
    frank::cpu::linear(m.x.row(static_cast<int64_t>(s) / m.k), 1, m.w.experts[m.experts[s]].gate, g.data());
    frank::cpu::linear(m.x.row(static_cast<int64_t>(s) / m.k), 1, m.w.experts[m.experts[s]].up, u.data());
    clamped_g += std::count_if(g.begin(), g.end(), [&](float y) { return y > m.limit; });
    clamped_u += std::count_if(u.begin(), u.end(), [&](float y) { return std::abs(y) > m.limit; });
  }
  if (clamped_g == 0 || clamped_u == 0) failures += report("moe_experts", (name + " clamp not reached").c_str(), 1, 0);
  if (!teeth) return failures;
  for (int role : {0, 2}) {
    ExpertWeights& e = m.w.experts[m.experts[0]];
    LinearWeight& matrix = role == 0 ? e.gate : e.down;
    const LinearWeight kept = matrix;
    corrupt_tile(matrix, matrix.quantized->trellis.size() / (16 * matrix.quantized->bits) / 3);
    const frank::Tensor wrong = reference(m);
    matrix = kept;
    size_t outside = 0;
    for (size_t i = 0; i < bound.size(); ++i) outside += !(std::abs(wrong.data[i] - want.data[i]) <= bound[i]);
    const std::string what = name + " bound catches a wrong " + (role == 0 ? "gate" : "down") + " tile (" +
                             std::to_string(outside) + " outside)";
    failures += report("moe_experts", what.c_str(), outside == 0 ? 1 : 0, 0);
  }
  return failures;
}

// The stages, which the whole output's bound (worst-case roundings carried through SwiGLU and down:
// loose at real sizes) cannot resolve, each against the CPU on the GPU's own inputs. The routed
// pass alone (exl3_routed_experts), its scratch read back (exl3_moe.cuh: g, u [slots, I], then
// y [slots, D]):
//   - g and u against cpu::linear on x within exl3_gemv_bound (the same input: the order of the sums
//     only, test_cuda_exl3.cpp's bound);
//   - y against cpu::linear on h formed on the host from the GPU's g and u (engine::swiglu_expert's
//     operations; the GPU's expf may differ from std::exp: hidden_bound with Bg = Bu = 0), within
//     exl3_gemv_bound;
//   - the routed sum: the GPU's y added on the host in the reference's order, bit for bit;
//   - moe_experts' whole output (`full`) against that routed sum plus the CPU's shared expert, within
//     the shared expert's bound and the add's rounding (the second pass adds it).
// moe_experts' whole output (`full`, n tokens) against the routed pass's sum (`routed`) plus the
// CPU's shared expert, within the shared expert's bound and the add's rounding (the second pass
// adds it).
int compare_shared_add(const MoeCase& m, int n, const std::vector<float>& routed, const std::vector<float>& full,
                       const std::vector<ExpertRun>& shared_of, const std::string& name) {
  double worst = 0;
  for (int t = 0; t < n; ++t)
    for (int d = 0; d < m.D; ++d) {
      const ExpertRun& shared = shared_of[t];
      const float r = routed[t * m.D + d];
      const double want = static_cast<double>(r) + shared.y[d];
      const double b = shared.bound[d] + 2 * kEps * (std::abs(r) + std::abs(shared.y[d]) + shared.bound[d]);
      const double ratio = std::abs(full[t * m.D + d] - want) / b;
      if (!(ratio <= worst)) worst = ratio;
    }
  return report("moe_experts", (name + " n=" + std::to_string(n) + " stages: shared expert added (|err|/bound)").c_str(),
                worst, 1.0);
}

// The host half: `scratch` and `routed` read back from the routed pass of the first n tokens,
// `full` moe_experts' output.
int compare_stages(const MoeCase& m, int n, const std::vector<float>& scratch, const std::vector<float>& routed,
                   const std::vector<float>& full, const std::vector<ExpertRun>& shared_of, const std::string& name) {
  const int k = m.k, D = m.D, I = m.I, slots = n * k;
  const float* g = scratch.data();
  const float* u = g + static_cast<size_t>(slots) * I;
  const float* y = u + static_cast<size_t>(slots) * I;
  const auto rows_of = [](const float* v, const std::vector<int>& ss, int width) {
    std::vector<float> out;
    for (int s : ss) out.insert(out.end(), v + static_cast<size_t>(s) * width, v + static_cast<size_t>(s + 1) * width);
    return out;
  };
  double worst_gate_up = 0, worst_down = 0;
  for (const auto& [e, ss] : slots_by_expert(m.experts, slots)) {
    const ExpertWeights& ew = m.w.experts[e];
    const int count = static_cast<int>(ss.size());
    const std::vector<float> xs = token_rows(m.x.data, ss, k, D);
    for (int role : {0, 1}) {
      const LinearWeight& matrix = role == 0 ? ew.gate : ew.up;
      std::vector<float> want(static_cast<size_t>(count) * I);
      frank::cpu::linear(xs.data(), count, matrix, want.data());
      const std::vector<double> b = exl3_gemv_bound(exl3_of(matrix), xs.data(), nullptr, count);
      worst_gate_up = std::max(worst_gate_up, worst_ratio(rows_of(role == 0 ? g : u, ss, I), want, b));
    }
    std::vector<float> hs;
    std::vector<double> dhs;
    const std::vector<double> zero(static_cast<size_t>(I), 0.0);
    for (int s : ss) {
      std::vector<float> h;
      std::vector<double> dh;
      hidden_bound(rows_of(g, {s}, I), rows_of(u, {s}, I), zero, zero, m.limit, m.weights[s], h, dh);
      hs.insert(hs.end(), h.begin(), h.end());
      dhs.insert(dhs.end(), dh.begin(), dh.end());
    }
    std::vector<float> want(static_cast<size_t>(count) * D);
    frank::cpu::linear(hs.data(), count, ew.down, want.data());
    const std::vector<double> b = exl3_gemv_bound(exl3_of(ew.down), hs.data(), dhs.data(), count);
    worst_down = std::max(worst_down, worst_ratio(rows_of(y, ss, D), want, b));
  }
  int differ = 0;
  for (int t = 0; t < n; ++t) {
    std::vector<int> order(k);  // the token's slots by (expert id, slot)
    std::iota(order.begin(), order.end(), t * k);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return m.experts[a] < m.experts[b]; });
    for (int d = 0; d < D; ++d) {
      float sum = 0.0f;
      for (int s : order) sum += y[static_cast<size_t>(s) * D + d];
      differ += std::bit_cast<uint32_t>(sum) != std::bit_cast<uint32_t>(routed[t * D + d]);
    }
  }
  const std::string at = name + " n=" + std::to_string(n) + " stages: ";
  int failures = report("moe_experts", (at + "gate, up (|err|/bound)").c_str(), worst_gate_up, 1.0);
  failures += report("moe_experts", (at + "down on the GPU's h (|err|/bound)").c_str(), worst_down, 1.0);
  failures += report("moe_experts", (at + "routed sum: bits differ from the reference order").c_str(), differ, 0);
  return failures + compare_shared_add(m, n, routed, full, shared_of, name);
}

// The routed pass alone for the first n tokens (exl3_routed_experts): its scratch and its sum.
struct RoutedPass {
  std::vector<float> scratch, routed;
};

RoutedPass routed_pass(const MoeCase& m, int n, const frank::cuda::ExpertTables& tables, const float* d_x,
                       const int32_t* d_experts, const float* d_weights, DeviceBuffer<float>& d_hidden,
                       DeviceBuffer<float>& d_out) {
  CUDA_OK(cudaMemset(d_hidden.get(), 0xff, d_hidden.size() * sizeof(float)));
  CUDA_OK(frank::cuda::exl3_routed_experts(d_x, n, m.D, m.I, d_experts, d_weights, m.k, m.E, tables, m.limit,
                                           d_hidden.get(), d_out.get(), nullptr));
  CUDA_OK(cudaDeviceSynchronize());
  return {download(d_hidden, static_cast<size_t>(n) * m.k * (2 * m.I + m.D)),
          download(d_out, static_cast<size_t>(n) * m.D)};
}

// Fewer tokens: every slot is computed on its own, so the routed pass of the first n tokens gives
// the bits of the first n tokens' slots and sums of the pass of all (`all`, n_max tokens), which
// compare_stages checked: the values that differ in any bit.
int differing_prefix(const MoeCase& m, int n, const RoutedPass& pass, const RoutedPass& all) {
  const size_t slots = static_cast<size_t>(n) * m.k, all_slots = static_cast<size_t>(m.n) * m.k;
  int differ = 0;
  const auto compare = [&](size_t at, size_t all_at, size_t count) {
    for (size_t i = 0; i < count; ++i)
      differ += std::bit_cast<uint32_t>(pass.scratch[at + i]) != std::bit_cast<uint32_t>(all.scratch[all_at + i]);
  };
  compare(0, 0, slots * m.I);                                         // g
  compare(slots * m.I, all_slots * m.I, slots * m.I);                 // u
  compare(2 * slots * m.I, 2 * all_slots * m.I, slots * m.D);         // y
  for (size_t i = 0; i < static_cast<size_t>(n) * m.D; ++i)
    differ += std::bit_cast<uint32_t>(pass.routed[i]) != std::bit_cast<uint32_t>(all.routed[i]);
  return differ;
}

// Each case: the pool's and shared expert's weights drawn anew (EXL3 bits and codebooks, the shared
// expert's type), then n = every entry of ns (the first n tokens): the stage checks, the last n
// also rerun for the same bits. `full_bound` (small shapes, where it resolves a wrong tile): also
// the whole output within its bound, and the bound shown to catch a wrong tile.
int check_exl3_moe(Rng& r, int D, int I, int E, int k, int pool_size,
                   const std::vector<std::pair<Exl3Case, WeightType>>& cases, const std::vector<int>& ns,
                   bool full_bound) {
  const int n_max = ns.back();
  MoeCase m = make_case(r, D, I, E, k, pool_size, n_max);
  auto d_x = upload(m.x.data);
  auto d_experts = upload(m.experts);
  auto d_weights = upload(m.weights);
  const frank::cuda::ExpertTables shape{nullptr, nullptr, nullptr, WeightType::Exl3, WeightType::BF16};
  DeviceBuffer<float> d_hidden(static_cast<size_t>(frank::cuda::moe_hidden_floats(n_max, k, D, I, shape)));
  DeviceBuffer<float> d_out(static_cast<size_t>(n_max) * D);
  int failures = 0;
  for (const auto& [cs, shared_type] : cases) {
    draw_weights(r, m, cs, shared_type);
    char what[200];
    std::snprintf(what, sizeof what, "exl3 K=%d/%d/%d %s + %s shared D=%d I=%d k=%d", cs.bits[0], cs.bits[1],
                  cs.bits[2], cs.mixed_codebooks ? "mixed codebooks" : codebook_name(cs.codebook),
                  frank::cuda::weight_type_name(shared_type), D, I, k);
    const std::string name = what;
    const std::vector<ExpertRun> shared = shared_runs(m.w.shared, m.x.data, n_max, D, I, m.limit);
    frank::Tensor want;
    std::vector<double> bound;
    if (full_bound) {
      want = reference(m);
      bound = moe_bound(m.w, m.x.data, n_max, D, I, k, m.experts, m.weights, m.limit, shared);
    }
    failures += host_checks(m, name, want, bound, full_bound);

    DeviceExperts dev;
    upload_experts(dev, m.w, m.pool, E, shared_type);
    frank::cuda::ExpertTables tables{dev.tables[0]->get(), dev.tables[1]->get(), dev.tables[2]->get(),
                                     WeightType::Exl3, shared_type};
    std::copy(std::begin(cs.bits), std::end(cs.bits), tables.exl3_bits);
    const RoutedPass all_tokens =
        routed_pass(m, n_max, tables, d_x->get(), d_experts->get(), d_weights->get(), d_hidden, d_out);
    for (int n : ns) {
      const auto run = [&](cudaStream_t stream) {
        return frank::cuda::moe_experts(d_x->get(), n, D, I, d_experts->get(), d_weights->get(), k, E, tables,
                                        m.limit, d_hidden.get(), d_out.get(), stream);
      };
      CUDA_OK(cudaMemset(d_out.get(), 0xff, d_out.size() * sizeof(float)));  // NaN where nothing is written
      CUDA_OK(run(nullptr));
      CUDA_OK(cudaDeviceSynchronize());
      const std::vector<float> got = download(d_out, static_cast<size_t>(n) * D);
      const std::string at = name + " n=" + std::to_string(n);
      if (full_bound) {
        const std::vector<float> ref(want.data.begin(), want.data.begin() + static_cast<ptrdiff_t>(n) * D);
        failures += report("moe_experts", (at + " (|err|/bound)").c_str(), worst_ratio(got, ref, bound), 1.0);
      }
      if (n == ns.back())
        failures += report("moe_experts", (at + " rerun: bits differ").c_str(),
                           rerun_differences(got, run, d_hidden, d_out), 0);
      // The stages: in full for all tokens, for fewer as the same bits as theirs in that pass.
      const RoutedPass pass = routed_pass(m, n, tables, d_x->get(), d_experts->get(), d_weights->get(), d_hidden, d_out);
      if (n == n_max) {
        failures += compare_stages(m, n, pass.scratch, pass.routed, got, shared, name);
      } else {
        failures += report("moe_experts", (at + " stages: bits differ from the first n of n=" + std::to_string(n_max)).c_str(),
                           differing_prefix(m, n, pass, all_tokens), 0);
        failures += compare_shared_add(m, n, pass.routed, got, shared, name);
      }
    }
  }

  // Refusals before anything runs: bits outside 1..8, an EXL3 shared expert. out keeps its bytes.
  const auto any = reinterpret_cast<const void* const*>(d_x->get());
  frank::cuda::ExpertTables no_bits{any, any, any, WeightType::Exl3, WeightType::BF16};
  frank::cuda::ExpertTables exl3_shared{any, any, any, WeightType::Exl3, WeightType::Exl3};
  exl3_shared.exl3_bits[0] = exl3_shared.exl3_bits[1] = exl3_shared.exl3_bits[2] = 2;
  for (const auto& [tables, what] : {std::pair{no_bits, "bad args: exl3 bits 0"},
                                     std::pair{exl3_shared, "bad args: exl3 shared expert"}})
    failures += refused_before_writing(what, d_out, [&, &tables = tables] {
      return frank::cuda::moe_experts(d_x->get(), n_max, D, I, d_experts->get(), d_weights->get(), k, E, tables,
                                      m.limit, d_hidden.get(), d_out.get(), nullptr);
    });
  return failures;
}

}  // namespace

int check_exl3_moe_ops(uint64_t seed) {
  Rng r{frank::SplitMix64(seed ^ 0x65786c33ull)};
  int failures = 0;
  // Small shapes: every K in 2..4 with every codebook, each with a bf16 and an FP8 shared expert;
  // gate, up, down of different bits with codebooks differing between experts; then I and D not
  // powers of two (several output blocks).
  std::vector<std::pair<Exl3Case, WeightType>> small;
  for (int bits : {2, 3, 4})
    for (Exl3Codebook cb : {Exl3Codebook::ThreeInst, Exl3Codebook::Mcg, Exl3Codebook::Mul1})
      for (WeightType shared : {WeightType::BF16, WeightType::Fp8Block128})
        small.push_back({{{bits, bits, bits}, cb, false}, shared});
  small.push_back({{{2, 3, 4}, Exl3Codebook::ThreeInst, true}, WeightType::BF16});
  failures += check_exl3_moe(r, 256, 128, 16, 4, 8, small, {1, 2, 5, 8}, true);
  failures += check_exl3_moe(r, 384, 640, 16, 6, 10, {{{{3, 3, 3}, Exl3Codebook::Mcg, false}, WeightType::Fp8Block32}},
                             {1, 2, 5, 8}, false);
  // DeepSeek-V4-Flash's experts (FP8 shared expert in blocks of 128) and V4.1's (blocks of 32): each
  // K with one codebook, the stage checks only (the whole output's worst-case bound does not resolve
  // errors at these sizes; the stages' do, to the GEMVs' own bound).
  for (const auto& [D, I, E, fp8] : {std::tuple{4096, 2048, 256, WeightType::Fp8Block128},
                                     std::tuple{5120, 2304, 384, WeightType::Fp8Block32}})
    failures += check_exl3_moe(r, D, I, E, 6, 12,
                               {{{{2, 2, 2}, Exl3Codebook::ThreeInst, false}, WeightType::BF16},
                                {{{3, 3, 3}, Exl3Codebook::Mcg, false}, fp8},
                                {{{4, 4, 4}, Exl3Codebook::Mul1, false}, fp8}},
                               {1, 2, 5, 8}, false);
  return failures;
}

}  // namespace frank_test
