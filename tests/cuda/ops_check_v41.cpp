// Checks of DeepSeek-V4.1's CUDA ops (frank/cuda/v41_ops.cuh) against the CPU reference:
// CpuOps::hc_map / hc_collapse, engine::fake_quant (bit for bit), engine::engram_gather /
// engram_mix (through cuda::linear, as the forward runs them), CpuOps::pool_groups over a run
// of chunks that start and end inside groups, CpuOps::stream_mean (DSpark's features, bit for
// bit), and DSpark's CpuOps::hc_sum and attend_block.
//
// Outputs start poisoned with NaN (ops_check_util.h), so an element a kernel fails to write fails
// the check.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "cuda_util.h"
#include "frank/core/linear_weight.h"
#include "frank/core/tensor.h"
#include "frank/cpu/ops.h"
#include "frank/cpu/quant/quant_formats.h"
#include "frank/cuda/ops.cuh"
#include "frank/cuda/stream_mean.cuh"
#include "frank/cuda/v41_ops.cuh"
#include "frank/engine/cpu_ops.h"
#include "frank/engine/engram.h"
#include "frank/engine/fake_quant.h"
#include "frank/engine/kv_record.h"
#include "frank/engine/rope.h"
#include "frank/model/weights_v41.h"
#include "ops_check.h"
#include "ops_check_util.h"

namespace frank_test {
namespace {

namespace cuda = frank::cuda;
namespace engine = frank::engine;
using engine::CpuOps;
using engine::FakeQuant;
using frank::Tensor;

// fp32 accumulation against the double-accumulating reference, as ops_check_dense.cpp's hc_pre.
constexpr double kTol = 1e-4;
// Attention: fp32 online softmax against the double-accumulating reference, as
// ops_check_attention.cpp's attend.
constexpr double kAttendTol = 1e-4;
// V4.1's norm epsilon (dsv41-model.md §1), used at the real shapes.
constexpr float kV41Eps = 1e-20f;

int refused(const char* op, const char* what, cudaError_t e) {
  return report(op, what, e == cudaErrorInvalidValue ? 0.0 : 1.0, 0.0);
}

// ---- fake_quant: bit for bit -------------------------------------------------------------------

const char* grid_name(FakeQuant g) {
  switch (g) {
    case FakeQuant::Fp8Ue8m0: return "fp8_ue8m0";
    case FakeQuant::Fp4E4m3: return "fp4_e4m3";
    case FakeQuant::Fp4Ue8m0: return "fp4_ue8m0";
  }
  return "?";
}

// The scale the reference gives a block whose largest magnitude is amax (fake_quant.h), to put
// values on its rounding boundaries.
float reference_scale(FakeQuant g, float amax) {
  switch (g) {
    case FakeQuant::Fp8Ue8m0: return engine::pow2_ceil(std::max(amax, 1e-4f) * static_cast<float>(1.0 / 448.0));
    case FakeQuant::Fp4E4m3:
      return frank::cpu::e4m3_value(engine::float_to_e4m3_saturating(std::max(amax, 6.0f * 0x1p-9f) / 6.0f));
    case FakeQuant::Fp4Ue8m0: return engine::pow2_ceil(std::max(amax, 6.0f * 0x1p-126f) * static_cast<float>(1.0 / 6.0));
  }
  return 1.0f;
}

// Quotients x / s on the grid's decision points: each non-negative grid value, each midpoint of
// two neighbours (a tie: exact, neighbours differ by a power of two) and the floats either side.
std::vector<float> decision_points(FakeQuant g) {
  std::vector<float> values;
  if (g == FakeQuant::Fp8Ue8m0)
    for (int c = 0; c <= 0x7E; ++c) values.push_back(frank::cpu::e4m3_value(static_cast<uint8_t>(c)));
  else
    for (int c = 0; c < 8; ++c) values.push_back(frank::cpu::e2m1_value(static_cast<uint8_t>(c)));
  std::vector<float> q;
  for (size_t i = 0; i < values.size(); ++i) {
    q.push_back(values[i]);
    if (i + 1 == values.size()) continue;
    const float tie = (values[i] + values[i + 1]) / 2.0f;
    q.insert(q.end(), {tie, std::nextafter(tie, 0.0f), std::nextafter(tie, INFINITY)});
  }
  return q;
}

// One block of len values of kind `kind` (mod 6): signed zeros; subnormals; huge values; a block
// whose amax A fixes the scale s and whose other values are s times decision points (<= A); values
// of any exponent (quotients that underflow); plain values with some -0.
void fill_block(Random& rng, FakeQuant g, const std::vector<float>& points, int kind, float* b, int len) {
  auto sign = [&] { return static_cast<uint32_t>(rng.next() & 1) << 31; };
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng.next() % static_cast<uint64_t>(hi - lo + 1)); };
  auto mantissa = [&] { return static_cast<uint32_t>(rng.next()) & 0x7FFFFFu; };
  switch (kind % 6) {
    case 0:
      for (int i = 0; i < len; ++i) b[i] = std::bit_cast<float>(sign());
      return;
    case 1:
      for (int i = 0; i < len; ++i) b[i] = std::bit_cast<float>(sign() | mantissa());
      return;
    case 2:
      for (int i = 0; i < len; ++i) b[i] = std::bit_cast<float>(sign() | static_cast<uint32_t>(pick(230, 254)) << 23 | mantissa());
      return;
    case 3: {
      // A with an exactly known scale: 448 * 2^k, 6 * 2^k, or 6 * an e4m3 value (then s = A / 6 exactly).
      float amax = 0.0f;
      if (g == FakeQuant::Fp8Ue8m0) amax = std::ldexp(448.0f, pick(-20, 100));
      if (g == FakeQuant::Fp4Ue8m0) amax = std::ldexp(6.0f, pick(-100, 100));
      if (g == FakeQuant::Fp4E4m3) amax = 6.0f * frank::cpu::e4m3_value(static_cast<uint8_t>(pick(0x08, 0x7E)));
      const float s = reference_scale(g, amax);
      for (int i = 0; i < len; ++i) {
        float v = amax + 1.0f;
        while (!(v <= amax)) v = points[rng.next() % points.size()] * s;
        b[i] = std::bit_cast<float>(std::bit_cast<uint32_t>(v) | sign());
      }
      b[rng.next() % static_cast<uint64_t>(len)] = std::bit_cast<float>(std::bit_cast<uint32_t>(amax) | sign());
      return;
    }
    case 4:
      for (int i = 0; i < len; ++i) b[i] = std::bit_cast<float>(sign() | static_cast<uint32_t>(pick(1, 254)) << 23 | mantissa());
      return;
    default:
      for (int i = 0; i < len; ++i) b[i] = rng.next() % 8 == 0 ? -0.0f : std::ldexp(rng.uniform(-1.0f, 1.0f), pick(-8, 8));
  }
}

// `pieces` rows of `width` values, filled block by block with every kind, rounded by the GPU and by
// engine::fake_quant row by row; every bit must agree (a width that is not a multiple of the block
// must come back untouched, as the reference leaves it).
int check_fake_quant(Random& rng, FakeQuant g, int block, int width, int pieces) {
  const std::vector<float> points = decision_points(g);
  const int64_t count = int64_t{width} * pieces;
  std::vector<float> x(static_cast<size_t>(count));
  int kind = 0;
  for (int64_t i = 0; i < count; i += block)
    fill_block(rng, g, points, kind++, x.data() + i, static_cast<int>(std::min<int64_t>(block, count - i)));
  std::vector<float> want = x;
  for (int p = 0; p < pieces; ++p) engine::fake_quant(want.data() + int64_t{p} * width, width, g, block);

  DeviceBuffer<float> d_x(x.size());
  upload(d_x, x);
  finish(cuda::fake_quant(d_x.get(), count, width, g, block, nullptr));
  const std::vector<float> got = download(d_x);
  int64_t mismatches = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i])) continue;
    if (mismatches++ == 0)
      std::printf("  first mismatch at %zu: x=%a want=%a got=%a\n", i, static_cast<double>(x[i]),
                  static_cast<double>(want[i]), static_cast<double>(got[i]));
  }
  return report("fake_quant", format("%s block=%d width=%d pieces=%d", grid_name(g), block, width, pieces).c_str(),
                static_cast<double>(mismatches), 0.0);
}

int check_fake_quant_all(Random& rng) {
  int failures = 0;
  for (FakeQuant g : {FakeQuant::Fp8Ue8m0, FakeQuant::Fp4E4m3, FakeQuant::Fp4Ue8m0}) {
    for (int block : {16, 32}) {
      failures += check_fake_quant(rng, g, block, block, 1);            // one block
      failures += check_fake_quant(rng, g, block, 2 * block, 777);       // many, several per warp
      failures += check_fake_quant(rng, g, block, block + block / 2, 5);  // not a multiple: untouched
    }
    // Blocks wider than a warp, and one that does not divide 32 (a warp per block, lanes left over).
    failures += check_fake_quant(rng, g, 64, 128, 33);
    failures += check_fake_quant(rng, g, 48, 96, 33);
  }
  // The real uses (v41_attention_forward.h): window K=V rows, compressed entries (head_dim 512),
  // indexer queries (64 heads) and keys (index_head_dim 128), a prefill chunk's worth.
  failures += check_fake_quant(rng, FakeQuant::Fp8Ue8m0, 32, 512, 300);
  failures += check_fake_quant(rng, FakeQuant::Fp4E4m3, 16, 512, 300);
  failures += check_fake_quant(rng, FakeQuant::Fp4Ue8m0, 32, 128, 64 * 37);
  DeviceBuffer<float> d(64);
  failures += refused("fake_quant", "count % width != 0 refused",
                      cuda::fake_quant(d.get(), 48, 32, FakeQuant::Fp8Ue8m0, 32, nullptr));
  return failures;
}

// ---- single-pass mHC ---------------------------------------------------------------------------

std::vector<float> flatten(const CpuOps::Mix& mixes) {
  std::vector<float> out;
  for (const auto& m : mixes)
    for (const auto* part : {&m.pre, &m.post, &m.comb}) out.insert(out.end(), part->begin(), part->end());
  return out;
}

// hc_map against CpuOps::hc_map: hc_pre's mix, so hc_pre's tolerance.
int check_hc_map(Random& rng, int N, int D, int n, float eps) {
  auto c = hc_config(N, D);
  c.rms_norm_eps = eps;
  const int M = (2 + N) * N;
  const int64_t K = int64_t{N} * D;
  const auto w = make_hc_weights(rng, N, D, M, 3);
  const std::vector<float> streams = rng.vec(static_cast<size_t>(n * K), -1.0f, 1.0f);
  const std::vector<float> want = flatten(CpuOps().hc_map(w, Tensor({n, K}, streams), c));

  DeviceBuffer<float> d_streams(streams.size()), d_fn(w.fn.data.size()), d_base(M), d_scale(3), d_mix(want.size());
  upload(d_streams, streams);
  upload(d_fn, w.fn.data);
  upload(d_base, w.base.data);
  upload(d_scale, w.scale.data);
  auto run = [&] {
    poison(d_mix);
    finish(cuda::hc_map(d_streams.get(), n, N, D, d_fn.get(), d_base.get(), d_scale.get(), c.hc_sinkhorn_iters,
                        c.hc_eps, c.rms_norm_eps, d_mix.get(), nullptr));
    return std::vector<std::vector<float>>{download(d_mix)};
  };
  const auto got = run();
  const std::string shape = format("N=%d D=%d n=%d eps=%g", N, D, n, static_cast<double>(eps));
  return report("hc_map", shape.c_str(), max_scaled_error(got[0], want), kTol) + check_rerun("hc_map", shape, got, run());
}

// hc_collapse against CpuOps::hc_collapse, with the reference's mix (so this check does not depend
// on hc_map's) or none (stream 0), rows [first, n): hc_pre's input, so hc_pre's tolerance.
int check_hc_collapse(Random& rng, int N, int D, int n, int first, bool with_mix, float eps) {
  auto c = hc_config(N, D);
  c.rms_norm_eps = eps;
  const int64_t K = int64_t{N} * D;
  const auto w = make_hc_weights(rng, N, D, (2 + N) * N, 3);
  const std::vector<float> streams = rng.vec(static_cast<size_t>(n * K), -1.0f, 1.0f);
  const std::vector<float> norm = rng.vec(D, 0.5f, 1.5f);
  const Tensor st({n, K}, streams);
  const CpuOps ops;
  const CpuOps::Mix mix = ops.hc_map(w, st, c);
  const std::vector<float> want = ops.hc_collapse(st, with_mix ? &mix : nullptr, Tensor({D}, norm), first, c).data;
  const std::vector<float> mix_values = flatten(mix);

  DeviceBuffer<float> d_streams(streams.size()), d_mix(mix_values.size()), d_norm(D), d_out(want.size());
  upload(d_streams, streams);
  upload(d_mix, mix_values);
  upload(d_norm, norm);
  poison(d_out);
  finish(cuda::hc_collapse(d_streams.get(), n, N, D, with_mix ? d_mix.get() : nullptr, first, d_norm.get(), eps,
                           d_out.get(), nullptr));
  return report("hc_collapse",
                format("N=%d D=%d n=%d first=%d %s", N, D, n, first, with_mix ? "mix" : "stream 0").c_str(),
                max_scaled_error(download(d_out), want), kTol);
}

int check_hc_all(Random& rng) {
  int failures = 0;
  // Toy shapes as ops_check_dense.cpp's hc_pre: unaligned D (one float per lane), D < (N+1)^2,
  // N = 8 (two token groups), D = 4099 (more collapse values than a thread keeps in registers).
  failures += check_hc_map(rng, 2, 37, 3, 1e-6f);
  failures += check_hc_map(rng, 4, 16, 2, 1e-6f);
  failures += check_hc_map(rng, 8, 1024, 9, 1e-6f);
  failures += check_hc_map(rng, 2, 4099, 2, 1e-6f);
  // More tokens than hc_map's scratch has room for (N = 4: 25 sums a token, 2^19 floats): one
  // split, its sums in mix (the toy path).
  failures += check_hc_map(rng, 4, 16, 21000, 1e-6f);
  for (bool with_mix : {true, false}) {
    failures += check_hc_collapse(rng, 2, 37, 3, 0, with_mix, 1e-6f);
    failures += check_hc_collapse(rng, 8, 1024, 9, 4, with_mix, 1e-6f);
    failures += check_hc_collapse(rng, 2, 4099, 2, 1, with_mix, 1e-6f);
    failures += check_hc_collapse(rng, 3, 6, 4, 4, with_mix, 1e-6f);  // first = n: nothing to write
  }
  // V4.1: hidden 5120, hc_mult 4, eps 1e-20; decode, verify, prefill, and the head's last rows.
  for (int n : {1, 3, 8, 13, 300}) {
    failures += check_hc_map(rng, 4, 5120, n, kV41Eps);
    failures += check_hc_collapse(rng, 4, 5120, n, 0, true, kV41Eps);
  }
  failures += check_hc_collapse(rng, 4, 5120, 1, 0, false, kV41Eps);
  failures += check_hc_collapse(rng, 4, 5120, 13, 12, true, kV41Eps);
  failures += check_hc_collapse(rng, 4, 5120, 300, 290, false, kV41Eps);
  DeviceBuffer<float> d(4096);
  float* p = d.get();
  failures += refused("hc_map", "N = 9 refused", cuda::hc_map(p, 1, 9, 16, p, p, p, 20, 1e-6f, 1e-6f, p, nullptr));
  failures += refused("hc_collapse", "first > n refused", cuda::hc_collapse(p, 2, 2, 16, p, 3, p, 1e-6f, p, nullptr));
  return failures;
}

// ---- pool_groups -------------------------------------------------------------------------------

// Latents: a softmax-weighted sum of `ratio` terms in the reference's fp32 order; only expf
// differs from std::exp (a few ulp in each weight), so the error is a few ulp of max |kv| <= 1.
constexpr double kPoolTol = 1e-5;

// One source's chunks in order (positions from 0), CpuOps::pool_groups against cuda::pool_groups
// call by call: each call's latents (the row past them must keep its poison), and the pending rows
// it leaves (copies: exact), which the next call reads.
int check_pool_groups(Random& rng, int ratio, int dim, const std::vector<int>& chunks) {
  const CpuOps ops;
  CpuOps::V41Source source;
  DeviceBuffer<float> d_pending_kv(static_cast<size_t>(ratio) * dim), d_pending_gate(d_pending_kv.size());
  poison(d_pending_kv);  // a row read before it was written makes a NaN latent
  poison(d_pending_gate);
  DevicePosition position;
  double err = 0.0;
  int64_t pending_mismatches = 0, start = 0;
  std::string sizes;
  for (int n : chunks) {
    const std::vector<float> kv = rng.vec(static_cast<size_t>(n) * dim, -1.0f, 1.0f);
    const std::vector<float> gate = rng.vec(kv.size(), -4.0f, 4.0f);
    const Tensor gate_t({n, dim}, gate);
    const Tensor want = ops.pool_groups(source, Tensor({n, dim}, kv), &gate_t, ratio, start);
    const int groups = static_cast<int>(want.rows());

    DeviceBuffer<float> d_kv(kv.size()), d_gate(gate.size()), d_latents(static_cast<size_t>(groups + 1) * dim);
    upload(d_kv, kv);
    upload(d_gate, gate);
    poison(d_latents);
    finish(cuda::pool_groups(d_pending_kv.get(), d_pending_gate.get(), d_kv.get(), d_gate.get(), n,
                             position.at(start), ratio, dim, d_latents.get(), groups + 1, nullptr));
    const std::vector<float> latents = download(d_latents);
    const auto past = latents.begin() + static_cast<int64_t>(groups) * dim;
    const double e = max_scaled_error(std::vector<float>(latents.begin(), past), want.data);
    if (!(e <= err)) err = e;  // NaN (a pending row read before it was written) fails
    if (!std::all_of(past, latents.end(), [](float v) { return std::bit_cast<uint32_t>(v) == 0xFFFFFFFFu; }))
      err = INFINITY;
    const std::vector<float> pending_kv = download(d_pending_kv), pending_gate = download(d_pending_gate);
    for (size_t i = 0; i < static_cast<size_t>(source.pending) * dim; ++i)
      pending_mismatches += (pending_kv[i] != source.pending_kv[i]) + (pending_gate[i] != source.pending_gate[i]);
    start += n;
    sizes += format("%s%d", sizes.empty() ? "" : ",", n);
  }
  const std::string what = format("ratio=%d dim=%d chunks=%s", ratio, dim, sizes.c_str());
  return report("pool_groups", what.c_str(), err, kPoolTol) +
         report("pool_groups", (what + " pending").c_str(), static_cast<double>(pending_mismatches), 0.0);
}

int check_pool_all(Random& rng) {
  // Chunks that start inside a group and close none, one or several, and leave a group open or not.
  int failures = check_pool_groups(rng, 2, 37, {1, 1, 3, 2, 5, 1, 4});
  failures += check_pool_groups(rng, 4, 37, {3, 2, 7, 1, 4, 9});
  failures += check_pool_groups(rng, 3, 200, {2, 2, 2, 6});
  // V4.1's ratio-2 compressor (head_dim 512): an odd prefill, then decode steps, then a verify chunk.
  failures += check_pool_groups(rng, 2, 512, {301, 1, 1, 1, 6});
  DeviceBuffer<float> d(64);
  DevicePosition position;
  float* p = d.get();
  failures += refused("pool_groups", "ratio 0 refused",
                      cuda::pool_groups(p, p, p, p, 1, position.at(0), 0, 4, p, 1, nullptr));
  return failures;
}

// ---- Engram ------------------------------------------------------------------------------------

// The reference's kv through the GPU mix: the double sums and the reference's fp32 steps leave the
// few ulp of expf in the gate (and of the sum order in the dot): well under 1e-5 of |x| + |v|.
constexpr double kMixTol = 1e-5;
// With kv from cuda::linear, kv carries the linear's error (kTol against cpu::linear) into x
// through the value and, amplified at most 2x by the gate's signed square root near |d| ~ 1e-2
// (0.25 * dd / (2 sqrt|d|)), through the gate.
constexpr double kEngramTol = 2 * kTol;

// One Engram layer as the forward runs it: gather the token's rows (columns per token), wkv by
// cuda::linear, then the gated mix into the N streams; against engine::engram_gather and
// engine::engram_mix per token. Stream 1's q_weight is zero, so its dot is exactly +0 and its gate
// sigmoid(copysign(1e-3, +0)) (reference notes W7); a sign rule that gave 0 or -1e-3 there would
// be off by 2.5e-4 * |v|.
int check_engram(Random& rng, int N, int D, int head_dim, int columns, int n, int64_t table_rows, float eps) {
  const int64_t in = int64_t{columns} * head_dim, out = int64_t{N + 1} * D;
  const Tensor table({table_rows, head_dim}, rng.vec(static_cast<size_t>(table_rows * head_dim), -1.0f, 1.0f));
  const float a = std::sqrt(3.0f / static_cast<float>(in));  // keys and values of unit scale
  const Tensor wkv({out, in}, rng.vec(static_cast<size_t>(out * in), -a, a));
  std::vector<float> q_weight = rng.vec(static_cast<size_t>(N) * D, 0.5f, 1.5f);
  if (N > 1) std::fill_n(q_weight.begin() + D, D, 0.0f);
  const std::vector<float> k_weight = rng.vec(q_weight.size(), 0.5f, 1.5f);
  const frank::model::V41EngramWeights w{table, frank::LinearWeight(wkv), Tensor({N, D}, q_weight),
                                         Tensor({N, D}, k_weight)};
  std::vector<int64_t> ids(static_cast<size_t>(n) * columns);
  for (int64_t& id : ids) id = static_cast<int64_t>(rng.next() % static_cast<uint64_t>(table_rows));
  const std::vector<float> streams = rng.vec(static_cast<size_t>(n) * N * D, -1.0f, 1.0f);

  std::vector<float> want_gathered, want = streams, kv(static_cast<size_t>(n * out));
  for (int t = 0; t < n; ++t) {
    const auto gathered = engine::engram_gather(table, std::span(ids).subspan(static_cast<size_t>(t) * columns, columns));
    want_gathered.insert(want_gathered.end(), gathered.begin(), gathered.end());
    engine::engram_mix(w, gathered, N, D, eps, want.data() + int64_t{t} * N * D);
    frank::cpu::linear(gathered.data(), 1, w.wkv, kv.data() + t * out);  // the kv engram_mix makes
  }

  DeviceBuffer<float> d_table(table.data.size()), d_gathered(want_gathered.size()), d_wkv(wkv.data.size());
  DeviceBuffer<float> d_kv(kv.size()), d_q(q_weight.size()), d_k(k_weight.size()), d_streams(streams.size());
  DeviceBuffer<int64_t> d_ids(ids.size());
  upload(d_table, table.data);
  upload(d_wkv, wkv.data);
  upload(d_q, q_weight);
  upload(d_k, k_weight);
  upload(d_ids, ids);
  const std::string shape = format("N=%d D=%d %dx%d n=%d", N, D, columns, head_dim, n);

  poison(d_gathered);
  finish(cuda::engram_gather(d_table.get(), table_rows, head_dim, d_ids.get(), static_cast<int64_t>(ids.size()),
                             d_gathered.get(), nullptr));
  int failures = report("engram_gather", shape.c_str(), max_scaled_error(download(d_gathered), want_gathered), 0.0);

  upload(d_kv, kv);
  upload(d_streams, streams);
  finish(cuda::engram_mix(d_streams.get(), n, N, D, d_kv.get(), d_q.get(), d_k.get(), eps, nullptr));
  failures += report("engram_mix", (shape + " reference kv").c_str(), max_scaled_error(download(d_streams), want), kMixTol);

  upload(d_streams, streams);
  poison(d_kv);
  finish(cuda::linear(d_gathered.get(), in, n, d_wkv.get(), cuda::WeightType::F32, out, in, d_kv.get(), out, nullptr));
  finish(cuda::engram_mix(d_streams.get(), n, N, D, d_kv.get(), d_q.get(), d_k.get(), eps, nullptr));
  failures += report("engram_mix", (shape + " gather+linear").c_str(), max_scaled_error(download(d_streams), want),
                     kEngramTol);
  return failures;
}

// Ids outside the table write zeros (the host checks ids before upload; engram_gather's contract).
int check_engram_gather_outside(Random& rng) {
  const int rows = 4, head_dim = 8;
  const std::vector<float> table = rng.vec(rows * head_dim, -1.0f, 1.0f);
  const std::vector<int64_t> ids = {-1, 4, 2, 1000};
  std::vector<float> want(ids.size() * head_dim, 0.0f);
  std::copy_n(table.begin() + 2 * head_dim, head_dim, want.begin() + 2 * head_dim);
  DeviceBuffer<float> d_table(table.size()), d_out(want.size());
  DeviceBuffer<int64_t> d_ids(ids.size());
  upload(d_table, table);
  upload(d_ids, ids);
  poison(d_out);
  finish(cuda::engram_gather(d_table.get(), rows, head_dim, d_ids.get(), 4, d_out.get(), nullptr));
  return report("engram_gather", "ids outside the table: zeros", max_scaled_error(download(d_out), want), 0.0);
}

int check_engram_all(Random& rng) {
  int failures = check_engram_gather_outside(rng);
  failures += check_engram(rng, 2, 37, 8, 3, 3, 50, 1e-6f);
  failures += check_engram(rng, 4, 300, 32, 6, 5, 1000, 1e-6f);
  // V4.1: hidden 5120, hc_mult 4, head_dim 256, 3 n-gram sizes x 8 heads = 24 columns (wkv
  // [25600, 6144]); decode and a short chunk.
  failures += check_engram(rng, 4, 5120, 256, 24, 1, 4096, kV41Eps);
  failures += check_engram(rng, 4, 5120, 256, 24, 3, 4096, kV41Eps);
  return failures;
}

// ---- stream_mean: bit for bit ---------------------------------------------------------------------

// CpuOps::stream_mean of n tokens' N streams of D, written by the GPU into column block `block` of
// rows of `blocks` * D (the features' layout): every bit must agree, the other blocks stay poisoned.
int check_stream_mean(Random& rng, int N, int D, int n, int blocks, int block) {
  const std::vector<float> streams = rng.vec(static_cast<size_t>(int64_t{n} * N * D), -4.0f, 4.0f);
  const Tensor want = CpuOps().stream_mean(Tensor({n, int64_t{N} * D}, streams), hc_config(N, D));
  const int64_t ldo = int64_t{blocks} * D;
  DeviceBuffer<float> d_streams(streams.size()), d_out(static_cast<size_t>(n * ldo));
  upload(d_streams, streams);
  poison(d_out);
  finish(cuda::stream_mean(d_streams.get(), n, N, D, d_out.get() + int64_t{block} * D, ldo, nullptr));
  const std::vector<float> got = download(d_out);
  int64_t mismatches = 0;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t i = 0; i < ldo; ++i) {
      const float g = got[t * ldo + i];
      const bool ours = i / D == block;
      mismatches += ours ? std::bit_cast<uint32_t>(g) != std::bit_cast<uint32_t>(want.row(t)[i % D]) : !std::isnan(g);
    }
  return report("stream_mean", format("N=%d D=%d n=%d block %d of %d", N, D, n, block, blocks).c_str(),
                static_cast<double>(mismatches), 0.0);
}

int check_stream_mean_all(Random& rng) {
  int failures = check_stream_mean(rng, 4, 24, 7, 3, 1);  // the DSpark fixture's shape
  failures += check_stream_mean(rng, 3, 37, 1, 1, 0);
  failures += check_stream_mean(rng, 4, 4096, 65, 3, 2);  // V4.1's hidden size
  failures += refused("stream_mean", "ldo < D", cuda::stream_mean(nullptr, 1, 4, 8, nullptr, 7, nullptr));
  return failures;
}

// ---- DSpark: hc_sum and attend_block ------------------------------------------------------------

// hc_sum against CpuOps::hc_sum, with the reference's mix or none (stream 0: bit for bit, but held
// to the same bound): hc_collapse's sum before its norm, so hc_collapse's tolerance.
int check_hc_sum(Random& rng, int N, int D, int n, int first, bool with_mix) {
  const auto c = hc_config(N, D);
  const int64_t K = int64_t{N} * D;
  const auto w = make_hc_weights(rng, N, D, (2 + N) * N, 3);
  const std::vector<float> streams = rng.vec(static_cast<size_t>(n * K), -1.0f, 1.0f);
  const Tensor st({n, K}, streams);
  const CpuOps ops;
  const CpuOps::Mix mix = ops.hc_map(w, st, c);
  const std::vector<float> want = ops.hc_sum(st, with_mix ? &mix : nullptr, first, c).data;
  const std::vector<float> mix_values = flatten(mix);

  DeviceBuffer<float> d_streams(streams.size()), d_mix(mix_values.size()), d_out(std::max<size_t>(want.size(), 1));
  upload(d_streams, streams);
  upload(d_mix, mix_values);
  poison(d_out);
  finish(cuda::hc_sum(d_streams.get(), n, N, D, with_mix ? d_mix.get() : nullptr, first, d_out.get(), nullptr));
  std::vector<float> got = download(d_out);
  got.resize(want.size());
  return report("hc_sum", format("N=%d D=%d n=%d first=%d %s", N, D, n, first, with_mix ? "mix" : "stream 0").c_str(),
                max_scaled_error(got, want), kTol);
}

// attend_block against CpuOps::attend_block on fp32 rows (the records DSpark's rings hold): a
// block of n rows at `start` over a ring of W rows of which the positions [start - W, start) are
// live (a random ring: rows of other positions must not be read). attend's tolerance (fp32 online
// softmax against the double-accumulating reference: ops_check_attention.cpp's kTol).
int check_attend_block(Random& rng, int H, int hd, int rope_dims, int W, int n, int64_t start) {
  const frank::engine::RopeTable rope(frank::model::RopeSpec{10000.0}, rope_dims);
  const std::vector<float> q = rng.vec(static_cast<size_t>(n) * H * hd, -3.0f, 3.0f);
  const std::vector<float> kv = rng.vec(static_cast<size_t>(n) * hd, -1.0f, 1.0f);
  const std::vector<float> ring = rng.vec(static_cast<size_t>(W) * hd, -1.0f, 1.0f);
  const std::vector<float> sinks = rng.vec(H, -2.0f, 4.0f);
  const std::vector<float> want = CpuOps()
                                      .attend_block(Tensor({n, int64_t{H} * hd}, q), Tensor({n, hd}, kv), ring, start,
                                                    W, Tensor({H}, sinks), rope)
                                      .data;

  const frank::engine::KvRowLayout layout = frank::engine::kv_row_layout(frank::engine::KvFormat::F32, hd, rope_dims);
  DeviceBuffer<float> d_q(q.size()), d_kv(kv.size()), d_ring(ring.size()), d_sinks(H), d_out(want.size());
  DeviceBuffer<float> d_inv_freq(std::max<size_t>(rope.inv_freq().size(), 1));
  DeviceBuffer<float> d_scratch(static_cast<size_t>(std::max<int64_t>(cuda::attend_scratch_floats(n, H, hd), 1)));
  upload(d_q, q);
  upload(d_kv, kv);
  upload(d_ring, ring);
  upload(d_sinks, sinks);
  upload(d_inv_freq, rope.inv_freq());
  poison(d_out);
  poison(d_scratch);
  DevicePosition position;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  finish(cuda::attend_block(d_q.get(), n, H, layout, reinterpret_cast<const uint8_t*>(d_ring.get()), W,
                            reinterpret_cast<const uint8_t*>(d_kv.get()), position.at(start), d_sinks.get(), scale,
                            d_inv_freq.get(), rope_dims / 2, d_out.get(), d_scratch.get(), nullptr));
  return report("attend_block",
                format("H=%d hd=%d W=%d n=%d start=%lld", H, hd, W, n, static_cast<long long>(start)).c_str(),
                max_scaled_error(download(d_out), want), kAttendTol);
}

int check_dspark_all(Random& rng) {
  int failures = 0;
  for (bool with_mix : {true, false}) {
    failures += check_hc_sum(rng, 2, 37, 3, 0, with_mix);
    failures += check_hc_sum(rng, 2, 4099, 2, 1, with_mix);
    failures += check_hc_sum(rng, 4, 5120, 16, 0, with_mix);  // V4.1's hidden, a block of 16
  }
  // Blocks at the start (no ring rows), inside the first window, past it (the ring wrapped, its
  // oldest live row anywhere), with 4, 2 and 1 heads a warp; few rows over many keys split them
  // over blocks; the real shapes (64 heads of 512, window 128) with the fixture's block of 5 and 16.
  failures += check_attend_block(rng, 4, 64, 16, 8, 5, 0);
  failures += check_attend_block(rng, 4, 64, 16, 8, 5, 3);
  failures += check_attend_block(rng, 2, 32, 8, 8, 3, 8);
  failures += check_attend_block(rng, 3, 100, 20, 8, 5, 29);
  failures += check_attend_block(rng, 4, 64, 16, 128, 2, 1000);
  failures += check_attend_block(rng, 64, 512, 64, 128, 5, 70);
  failures += check_attend_block(rng, 64, 512, 64, 128, 16, 4321);
  DeviceBuffer<float> d(64);
  DevicePosition position;
  float* p = d.get();
  const auto* u = reinterpret_cast<const uint8_t*>(p);
  const frank::engine::KvRowLayout l8 = frank::engine::kv_row_layout(frank::engine::KvFormat::F32, 8, 0);
  failures += refused("attend_block", "W = 0 refused",
                      cuda::attend_block(p, 1, 1, l8, u, 0, u, position.at(0), p, 1.f, p, 0, p, nullptr, nullptr));
  failures += refused("hc_sum", "first > n refused", cuda::hc_sum(p, 2, 2, 16, nullptr, 3, p, nullptr));
  return failures;
}

}  // namespace

int check_v41_ops(uint64_t seed) {
  Random rng(seed);
  int failures = check_fake_quant_all(rng);
  failures += check_hc_all(rng);
  failures += check_pool_all(rng);
  failures += check_engram_all(rng);
  failures += check_stream_mean_all(rng);
  failures += check_dspark_all(rng);
  return failures;
}

}  // namespace frank_test
