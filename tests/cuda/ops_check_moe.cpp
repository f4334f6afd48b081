// The MoE ops (frank/cuda/ops.cuh: route, moe_experts) against engine::route and
// engine::moe_forward, on random inputs at small and DeepSeek-V4-Flash shapes.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "cuda_util.h"
#include "frank/core/splitmix64.h"
#include "frank/cpu/ops.h"
#include "frank/cpu/quant/quant_formats.h"
#include "frank/cuda/native_weight.h"
#include "frank/cuda/ops.cuh"
#include "frank/engine/indexer.h"
#include "frank/engine/moe.h"
#include "ops_check.h"
#include "ops_check_moe.h"

namespace frank_test {
namespace {

// ---- route ----------------------------------------------------------------------------------

enum class Logits { Random, Ties, Hash };

// The router logits are given to engine::route as its input x with an identity router, whose
// double dot products return them exactly. gate_temp != 1: DeepSeek-V4.1's router temperature.
int check_route(Rng& r, int E, int k, int n, Logits kind, bool with_bias, float gate_temp = 1.0f) {
  frank::model::ModelConfig c;
  c.hidden_size = E, c.n_routed_experts = E, c.experts_per_token = k, c.routed_scaling_factor = 1.5f;
  frank::model::MoeWeights w;
  w.router = frank::Tensor({int64_t{E}, int64_t{E}});
  for (int e = 0; e < E; ++e) w.router.dense.row(e)[e] = 1.0f;
  w.selection_bias = frank::Tensor({int64_t{E}});
  std::vector<float> logits(static_cast<size_t>(n) * E);
  for (float& v : logits) {
    if (kind == Logits::Ties) {
      v = static_cast<float>(r.below(5) - 2);  // few values: equal scores everywhere
    } else {
      const int pick = r.below(20);  // both softplus branches: above 20, and far below 0
      v = pick == 0 ? r.uniform(18.0f, 26.0f) : pick == 1 ? r.uniform(-40.0f, -20.0f) : r.uniform(-4.0f, 4.0f);
    }
  }
  if (with_bias)
    for (float& b : w.selection_bias.data) b = kind == Logits::Ties ? 0.25f * r.below(2) : r.uniform(-0.5f, 0.5f);
  const bool hash = kind == Logits::Hash;
  const int vocab = 50;
  std::vector<int32_t> ids(n), all(E);
  std::iota(all.begin(), all.end(), 0);
  if (hash)
    for (int v = 0; v < vocab; ++v)
      for (int32_t e : draw_experts(r, all, k, true)) w.tid2eid.push_back(e);
  for (int32_t& id : ids) id = r.below(vocab);

  std::vector<int32_t> want_experts;
  std::vector<float> want_weights;
  int ties = 0;  // tokens whose k-th choice rests on the tie rule
  for (int t = 0; t < n; ++t) {
    const float* x = logits.data() + static_cast<size_t>(t) * E;
    const frank::engine::Routing ref = frank::engine::route(c, w, hash, x, ids[t], gate_temp);
    want_experts.insert(want_experts.end(), ref.experts.begin(), ref.experts.end());
    want_weights.insert(want_weights.end(), ref.weights.begin(), ref.weights.end());
    std::vector<float> keys(E);
    for (int e = 0; e < E; ++e) keys[e] = std::sqrt(frank::cpu::softplus(x[e] / gate_temp)) + w.selection_bias.data[e];
    ties += !hash && frank::engine::tie_at_kth(keys, k);
  }

  auto d_logits = upload(logits);
  auto d_bias = upload(w.selection_bias.data);
  auto d_tid2eid = upload(hash ? w.tid2eid : std::vector<int32_t>{0});
  auto d_ids = upload(ids);
  DeviceBuffer<int32_t> d_experts(want_experts.size());
  DeviceBuffer<float> d_weights(want_weights.size());
  CUDA_OK(frank::cuda::route(d_logits->get(), n, E, k, with_bias ? d_bias->get() : nullptr,
                             hash ? d_tid2eid->get() : nullptr, d_ids->get(), c.routed_scaling_factor, d_experts.get(),
                             d_weights.get(), nullptr, nullptr, gate_temp));
  const std::vector<int32_t> got_experts = download(d_experts, want_experts.size());
  const std::vector<float> got_weights = download(d_weights, want_weights.size());

  int wrong = 0;
  for (size_t i = 0; i < want_experts.size(); ++i) wrong += got_experts[i] != want_experts[i];
  const char* kinds[] = {"random", "ties", "hash"};
  char what[96];
  std::snprintf(what, sizeof what, "E=%d k=%d n=%d %s%s temp %g", E, k, n, kinds[static_cast<int>(kind)],
                with_bias ? " bias" : "", gate_temp);
  std::string name = what;
  if (kind == Logits::Ties) name += " (" + std::to_string(ties) + " at k-th)";
  // A tie case whose ties never reach the k-th place could not catch a wrong tie rule.
  int failures = kind == Logits::Ties && ties == 0 ? report("route", (name + " no tie").c_str(), 1, 0) : 0;
  failures += report("route", (name + " experts").c_str(), wrong, 0);
  // The scores differ from the reference's by an ulp at most; sums of k of them stay within 1e-5.
  failures += report("route", (name + " weights").c_str(), max_scaled_error(got_weights, want_weights), 1e-5);
  return failures;
}

// ---- moe_experts ----------------------------------------------------------------------------

// The weight types of a case: the routed experts' and the shared expert's (ExpertTables).
struct Types {
  WeightType routed, shared;
};

// One shape: tokens choose k experts (hash routing) from a pool of `pool` experts, distinct per
// token or with repeats. Runs fp32 weights, bf16 weights, then bf16 routed experts with an fp32
// shared expert (two passes, moe_experts), and FP8 / FP4 ones where the shape allows (below), each
// for n = every entry of ns (the first n tokens; the reference's rows are per token), the last n
// also rerun for bit-identical output; each case with its clamps reached. `misalign` starts every
// expert matrix 4 (fp32) or 2 (bf16) bytes past a 16-byte boundary (the kernels' element-load path).
int check_moe(Rng& r, int D, int I, int E, int k, int pool_size, bool distinct, const std::vector<int>& ns,
              bool misalign = false) {
  const int n_max = ns.back();
  const float limit = 10.0f;
  frank::model::ModelConfig c;
  c.hidden_size = D, c.n_routed_experts = E, c.experts_per_token = k, c.moe_intermediate_size = I;
  c.swiglu_limit = limit, c.routed_scaling_factor = 1.5f;
  frank::model::MoeWeights w;
  w.router = frank::Tensor({int64_t{E}, int64_t{D}});
  for (float& v : w.router.dense.data) v = r.uniform(-2.0f, 2.0f) / std::sqrt(static_cast<float>(D));
  std::vector<int32_t> all(E), pool;
  std::iota(all.begin(), all.end(), 0);
  pool = draw_experts(r, all, pool_size, true);
  for (int t = 0; t < n_max; ++t)
    for (int32_t e : draw_experts(r, pool, k, distinct)) w.tid2eid.push_back(e);

  // x in [-1, 1]; gate and up rows give dot products of standard deviation ~6, so about a tenth
  // pass the limit 10 on each side; down keeps the outputs of order 1.
  const float a = 18.0f / std::sqrt(static_cast<float>(D)), b = 0.2f / std::sqrt(static_cast<float>(I));
  auto random_matrix = [&](int64_t rows, int64_t cols, float s) {
    frank::Tensor t({rows, cols});
    for (float& v : t.data) v = r.uniform(-s, s);
    return t;
  };
  w.experts.resize(E);
  std::vector<frank::model::ExpertWeights*> used;  // the pool, then the shared expert (table index E)
  for (int32_t e : pool) used.push_back(&w.experts[e]);
  used.push_back(&w.shared);
  frank::Tensor x = random_matrix(n_max, D, 1.0f);
  std::vector<int32_t> tokens(n_max), experts;
  std::iota(tokens.begin(), tokens.end(), 0);
  std::vector<float> weights;
  for (int t = 0; t < n_max; ++t) {
    const frank::engine::Routing ro = frank::engine::route(c, w, true, x.row(t), tokens[t]);
    experts.insert(experts.end(), ro.experts.begin(), ro.experts.end());
    weights.insert(weights.end(), ro.weights.begin(), ro.weights.end());
  }
  // Gate values above the limit and up values beyond it on either side, over the tokens' routed
  // experts until both have been seen 10 times: the clamp must be exercised on both sides.
  long clamped_g = 0, clamped_u = 0;
  const auto count_clamps = [&] {
    clamped_g = clamped_u = 0;
    std::vector<float> g(I), u(I);
    for (size_t i = 0; i < experts.size() && (clamped_g < 10 || clamped_u < 10); ++i) {
      frank::cpu::linear(x.row(static_cast<int64_t>(i) / k), 1, w.experts[experts[i]].gate, g.data());
      frank::cpu::linear(x.row(static_cast<int64_t>(i) / k), 1, w.experts[experts[i]].up, u.data());
      clamped_g += std::count_if(g.begin(), g.end(), [&](float y) { return y > limit; });
      clamped_u += std::count_if(u.begin(), u.end(), [&](float y) { return std::abs(y) > limit; });
    }
  };

  auto d_x = upload(x.data);
  auto d_experts = upload(experts);
  auto d_weights = upload(weights);
  DeviceBuffer<float> d_hidden(static_cast<size_t>(n_max) * (k + 1) * I), d_out(static_cast<size_t>(n_max) * D);
  int failures = 0;
  // fp32, bf16 (fp32 draws rounded), then (where D and I suit their 16-byte loads) FP8 in blocks of
  // 128 and 32 and FP4: random codes whose scales give every used matrix about the fp32 draws' RMS
  // (so the clamps still act), which the reference computes on directly.
  // Then the shared expert of another type than the routed ones, as DeepSeek-V4-Flash ships them
  // (FP4 routed, FP8 shared) and other pairs: the routed pass, then the shared expert's added.
  // Every weight is exact in its type and the sums are fp32 in either pass, so the tolerance of
  // one type holds (the order, the routed sum then the shared expert, is the reference's).
  std::vector<Types> cases = {
      {WeightType::F32, WeightType::F32}, {WeightType::BF16, WeightType::BF16}, {WeightType::BF16, WeightType::F32}};
  if (!misalign && D % 32 == 0 && I % 32 == 0)
    cases.insert(cases.end(), {{WeightType::Fp8Block128, WeightType::Fp8Block128},
                               {WeightType::Fp8Block32, WeightType::Fp8Block32},
                               {WeightType::Fp4, WeightType::Fp4},
                               {WeightType::Fp4, WeightType::Fp8Block128},
                               {WeightType::Fp4, WeightType::Fp8Block32},
                               {WeightType::Fp8Block128, WeightType::BF16},
                               {WeightType::BF16, WeightType::Fp4}});
  for (const Types& types : cases) {
    // Expert i of `used` (the pool, then the shared one) in its type.
    const auto type_of = [&](size_t i) { return i < pool.size() ? types.routed : types.shared; };
    for (size_t i = 0; i < used.size(); ++i) {
      const WeightType type = type_of(i);
      const auto matrix = [&](int64_t rows, int64_t cols, float s) -> frank::LinearWeight {
        if (frank::cuda::is_quantized(type)) return random_codes(r, type, rows, cols, s);
        frank::Tensor t = random_matrix(rows, cols, s);
        if (type == WeightType::BF16)
          for (float& v : t.data) v = round_bf16(v);
        return t;
      };
      used[i]->gate = matrix(I, D, a), used[i]->up = matrix(I, D, a), used[i]->down = matrix(D, I, b);
    }
    count_clamps();
    const std::string type_name = types.shared == types.routed
                                      ? frank::cuda::weight_type_name(types.routed)
                                      : std::string(frank::cuda::weight_type_name(types.routed)) + "+" +
                                            frank::cuda::weight_type_name(types.shared) + " shared";
    const frank::Tensor want = frank::engine::moe_forward(c, w, true, x, tokens);
    // Device copies of the used experts; every other table entry (never chosen) points at the shared expert.
    std::vector<std::unique_ptr<DeviceBuffer<float>>> f32;
    std::vector<std::unique_ptr<DeviceBuffer<uint16_t>>> bf16;
    std::vector<std::unique_ptr<DeviceBuffer<uint8_t>>> shipped;
    std::vector<const void*> tables[3];
    for (auto& t : tables) t.assign(E + 1, nullptr);
    for (size_t i = 0; i < used.size(); ++i) {
      const int e = i < pool.size() ? pool[i] : E;
      const WeightType type = type_of(i);
      const frank::LinearWeight* m[3] = {&used[i]->gate, &used[i]->up, &used[i]->down};
      const size_t skip = misalign ? 1 : 0;  // leading elements before the matrix
      for (int q = 0; q < 3; ++q) {
        if (frank::cuda::is_quantized(type)) {
          shipped.push_back(upload(frank::cuda::native_bytes(*m[q]->quantized)));
          tables[q][e] = shipped.back()->get();
        } else if (type == WeightType::F32) {
          std::vector<float> values(skip, 0.0f);
          values.insert(values.end(), m[q]->dense.data.begin(), m[q]->dense.data.end());
          f32.push_back(upload(values));
          tables[q][e] = f32.back()->get() + skip;
        } else {
          std::vector<uint16_t> bits(skip, 0);
          for (float v : m[q]->dense.data) bits.push_back(static_cast<uint16_t>(std::bit_cast<uint32_t>(v) >> 16));
          bf16.push_back(upload(bits));
          tables[q][e] = bf16.back()->get() + skip;
        }
      }
    }
    for (auto& t : tables)
      for (const void*& p : t)
        if (!p) p = t[E];
    auto d_gate = upload(tables[0]), d_up = upload(tables[1]), d_down = upload(tables[2]);
    const frank::cuda::ExpertTables dev{d_gate->get(), d_up->get(), d_down->get(), types.routed, types.shared};
    for (int n : ns) {
      const auto run = [&](cudaStream_t stream) {
        return frank::cuda::moe_experts(d_x->get(), n, D, I, d_experts->get(), d_weights->get(), k, E, dev, limit,
                                        d_hidden.get(), d_out.get(), stream);
      };
      CUDA_OK(cudaMemset(d_out.get(), 0xff, d_out.size() * sizeof(float)));  // NaN where nothing is written
      CUDA_OK(run(nullptr));
      const std::vector<float> got = download(d_out, static_cast<size_t>(n) * D);
      const std::vector<float> ref(want.data.begin(), want.data.begin() + static_cast<ptrdiff_t>(n) * D);
      char what[160];
      std::snprintf(what, sizeof what, "%s D=%d I=%d E=%d k=%d n=%d pool=%d%s%s clamp g%ld u%ld", type_name.c_str(),
                    D, I, E, k, n, pool_size, distinct ? "" : " repeats", misalign ? " misaligned" : "", clamped_g,
                    clamped_u);
      failures += report("moe_experts", what, max_scaled_error(got, ref), 1e-4);
      if (n == ns.back())
        failures += report("moe_experts", (std::string(what) + " rerun: bits differ").c_str(),
                           rerun_differences(got, run, d_hidden, d_out), 0);
      // The same sum in two calls (ops.cuh): the shared expert's pass on half the blocks, then the
      // routed experts' adding to it. With two types its bits are moe_experts' (one addition).
      const auto run_split = [&](cudaStream_t stream) {
        if (const cudaError_t e = frank::cuda::moe_shared_expert(d_x->get(), n, D, I, E, dev, limit, 2,
                                                                 d_hidden.get(), d_out.get(), stream))
          return e;
        return frank::cuda::moe_routed_experts(d_x->get(), n, D, I, d_experts->get(), d_weights->get(), k, E, dev,
                                               limit, nullptr, d_hidden.get(), d_out.get(), stream);
      };
      CUDA_OK(cudaMemset(d_out.get(), 0xff, d_out.size() * sizeof(float)));
      CUDA_OK(run_split(nullptr));
      const std::vector<float> split = download(d_out, static_cast<size_t>(n) * D);
      const std::string split_what = std::string(what) + " split passes";
      failures += report("moe_shared_expert+moe_routed_experts", split_what.c_str(), max_scaled_error(split, ref), 1e-4);
      if (types.shared != types.routed)
        failures += report("moe_shared_expert+moe_routed_experts", (split_what + ": bits differ from one call").c_str(),
                           static_cast<double>(std::memcmp(split.data(), got.data(), split.size() * sizeof(float)) != 0),
                           0);
      if (n == ns.back())
        failures += report("moe_shared_expert+moe_routed_experts", (split_what + " rerun: bits differ").c_str(),
                           rerun_differences(split, run_split, d_hidden, d_out), 0);
    }
    if (clamped_g == 0 || clamped_u == 0)
      failures += report("moe_experts", (type_name + " clamp not reached").c_str(), 1, 0);
  }

  const frank::cuda::ExpertTables none{nullptr, nullptr, nullptr, WeightType::F32, WeightType::F32};
  failures += bad_argument("moe_experts", "bad args: k=0",
                           frank::cuda::moe_experts(d_x->get(), 1, D, I, d_experts->get(), d_weights->get(), 0, E, none,
                                                    limit, d_hidden.get(), d_out.get(), nullptr));
  failures += bad_argument("moe_routed_experts", "bad args: k=0",
                           frank::cuda::moe_routed_experts(d_x->get(), 1, D, I, d_experts->get(), d_weights->get(), 0, E,
                                                           none, limit, nullptr, d_hidden.get(), d_out.get(), nullptr));
  failures += bad_argument("moe_shared_expert", "bad args: blocks_share=0",
                           frank::cuda::moe_shared_expert(d_x->get(), 1, D, I, E, none, limit, 0, d_hidden.get(),
                                                          d_out.get(), nullptr));
  if (D % 32 != 0 || I % 32 != 0) {
    // An FP4 shared expert the shape cannot serve is refused before the routed pass would run: out
    // keeps its bytes. (The tables are never read: any device address will do.)
    const auto any = reinterpret_cast<const void* const*>(d_x->get());
    const frank::cuda::ExpertTables fp4_shared{any, any, any, WeightType::F32, WeightType::Fp4};
    failures += refused_before_writing("bad args: fp4 shared expert, D or I % 32 != 0", d_out, [&] {
      return frank::cuda::moe_experts(d_x->get(), n_max, D, I, d_experts->get(), d_weights->get(), k, E, fp4_shared,
                                      limit, d_hidden.get(), d_out.get(), nullptr);
    });
  }
  return failures;
}

}  // namespace

int check_moe_ops(uint64_t seed) {
  Rng r{frank::SplitMix64(seed ^ 0x6d6f65ull)};
  int failures = 0;
  for (bool bias : {false, true}) failures += check_route(r, 8, 2, 9, Logits::Random, bias);
  failures += check_route(r, 8, 2, 33, Logits::Ties, false);
  failures += check_route(r, 8, 2, 9, Logits::Hash, false);
  for (int E : {256, 384}) {
    failures += check_route(r, E, 6, 67, Logits::Random, true);
    failures += check_route(r, E, 6, 67, Logits::Ties, false);
    failures += check_route(r, E, 6, 67, Logits::Ties, true);
    failures += check_route(r, E, 6, 67, Logits::Hash, false);
  }
  for (float temp : {1.5f, 0.7f}) failures += check_route(r, 384, 6, 67, Logits::Random, true, temp);
  DeviceBuffer<float> logits(16), weights(16);
  DeviceBuffer<int32_t> experts(16);
  failures += bad_argument("route", "bad args: k > E",
                           frank::cuda::route(logits.get(), 1, 4, 5, nullptr, nullptr, nullptr, 1.0f, experts.get(),
                                              weights.get(), nullptr));
  failures += bad_argument("route", "bad args: hash without ids",
                           frank::cuda::route(logits.get(), 1, 8, 2, nullptr, experts.get(), nullptr, 1.0f,
                                              experts.get(), weights.get(), nullptr));

  // Small odd shapes: the scalar path (D, I not multiples of 4), two token groups, one expert
  // chosen by many slots (more than a group's worth); then the vector path at small shapes (rows
  // shorter than a warp's 16-byte loads, partial units), also on misaligned matrices.
  failures += check_moe(r, 37, 19, 8, 3, 5, false, {3, 11});
  failures += check_moe(r, 37, 19, 8, 3, 1, false, {11});
  failures += check_moe(r, 96, 40, 8, 2, 8, true, {1, 13});
  failures += check_moe(r, 64, 24, 8, 2, 4, true, {3, 9}, true);
  // D and I multiples of 32: also FP8 and FP4 (one 16-byte load of e2m1 covers a row of I), and
  // the shared expert in another type than the routed ones.
  failures += check_moe(r, 64, 32, 8, 2, 4, true, {3, 9});
  // DeepSeek-V4-Flash: tokens share experts from a pool of 12, as decode steps often do (n = 1, 2,
  // 4, 8: every token-count kernel); then all tokens choose the same 6 experts. Both with the
  // checkpoint's types too: FP4 routed experts, FP8 shared expert.
  failures += check_moe(r, 4096, 2048, 256, 6, 12, true, {1, 2, 4, 8});
  failures += check_moe(r, 4096, 2048, 256, 6, 6, true, {3, 4});
  return failures;
}

}  // namespace frank_test
