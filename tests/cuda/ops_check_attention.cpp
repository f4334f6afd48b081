// Checks of the attention-state and attention ops (frank/cuda/attention.cu, compressor.cu,
// indexer.cu) against the CPU reference: engine::attend_with_sink, engine::Compressor::push and
// engine::indexer_scores.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_util.h"
#include "frank/cuda/ops.cuh"
#include "frank/engine/attention.h"
#include "frank/engine/compressor.h"
#include "frank/engine/indexer.h"
#include "frank/engine/rope.h"
#include "ops_check.h"

namespace frank_test {
namespace {

using frank::cuda::CompressorBuffers;

constexpr double kTol = 1e-4;  // fp32 accumulation against the double-accumulating reference
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> random_vector(std::mt19937_64& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

template <class T>
void put(DeviceBuffer<T>& d, const std::vector<T>& h, size_t offset = 0) {
  CUDA_OK(cudaMemcpy(d.get() + offset, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
}

template <class T>
std::vector<T> get(const T* d, size_t n) {
  std::vector<T> h(n);
  CUDA_OK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

// Poisons a buffer with NaN (all bits set), so a kernel that reads what it should not shows it.
template <class T>
void poison(DeviceBuffer<T>& d) {
  CUDA_OK(cudaMemset(d.get(), 0xff, d.size() * sizeof(T)));
}

// ---- window_store ---------------------------------------------------------------------------

int check_window_store(std::mt19937_64& rng, int W, int hd, const std::vector<int>& chunks, const char* what) {
  std::vector<float> ring(static_cast<size_t>(W) * hd, 0.f);
  DeviceBuffer<float> d_ring(ring.size());
  put(d_ring, ring);
  double err = 0.0;
  int64_t start = 0;
  DevicePosition position;
  for (int n : chunks) {
    const auto kv = random_vector(rng, static_cast<size_t>(n) * hd, -1.f, 1.f);
    DeviceBuffer<float> d_kv(kv.size());
    put(d_kv, kv);
    CUDA_OK(frank::cuda::window_store(d_ring.get(), W, hd, d_kv.get(), n, position.at(start), nullptr));
    for (int t = 0; t < n; ++t)
      std::copy_n(kv.begin() + int64_t{t} * hd, hd, ring.begin() + ((start + t) % W) * hd);
    err = std::max(err, max_scaled_error(get(d_ring.get(), ring.size()), ring));
    start += n;
  }
  return report("window_store", what, err, 0.0);  // a copy: exact
}

// ---- attend ---------------------------------------------------------------------------------

struct AttendCase {
  const char* what;
  int H, hd, W;
  int ratio;   // 0: sliding only
  int k_sel;   // > 0: CSA (a selection per token), 0: HCA (every visible entry)
  int64_t first;  // position of the first chunk
  std::vector<int> chunks;
};

// Runs the case's chunks in order through attend (then window_store, as a layer does) and compares
// every output with attend_with_sink over the key list the contract defines.
int check_attend(std::mt19937_64& rng, const AttendCase& c) {
  const int H = c.H, hd = c.hd, W = c.W;
  const int64_t total = std::accumulate(c.chunks.begin(), c.chunks.end(), int64_t{0});
  const int64_t end = c.first + total, oldest = std::max<int64_t>(0, c.first - W);
  // K=V rows of every position the case can see, ring rows of the positions before the first chunk.
  const auto history = random_vector(rng, static_cast<size_t>(end - oldest) * hd, -1.f, 1.f);
  auto kv_row = [&](int64_t p) { return history.data() + (p - oldest) * hd; };
  std::vector<float> ring(static_cast<size_t>(W) * hd, kNaN);
  for (int64_t p = oldest; p < c.first; ++p) std::copy_n(kv_row(p), hd, ring.begin() + (p % W) * hd);
  const int64_t n_entries = c.ratio > 0 ? end / c.ratio + 1 : 1;
  const auto entries = random_vector(rng, static_cast<size_t>(n_entries) * hd, -1.f, 1.f);
  DevicePosition position;
  const auto sinks = random_vector(rng, H, -2.f, 4.f);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));

  DeviceBuffer<float> d_ring(ring.size()), d_entries(entries.size()), d_sinks(H);
  put(d_ring, ring);
  put(d_entries, entries);
  put(d_sinks, sinks);

  double err = 0.0;
  int64_t start = c.first;
  for (int n : c.chunks) {
    // Queries of a few units per element, so the logits spread over several units.
    const auto q = random_vector(rng, static_cast<size_t>(n) * H * hd, -3.f, 3.f);
    const std::vector<float> chunk_kv(kv_row(start), kv_row(start + n));
    std::vector<int32_t> selected;
    if (c.k_sel > 0) {
      // Distinct visible entries in random order; about one slot in eight left empty (-1), and all
      // slots past the visible count.
      for (int t = 0; t < n; ++t) {
        std::vector<int32_t> pick(static_cast<size_t>((start + t + 1) / c.ratio));
        std::iota(pick.begin(), pick.end(), 0);
        std::shuffle(pick.begin(), pick.end(), rng);
        pick.resize(c.k_sel, -1);
        for (auto& e : pick)
          if (rng() % 8 == 0) e = -1;
        selected.insert(selected.end(), pick.begin(), pick.end());
      }
    }
    DeviceBuffer<float> d_q(q.size()), d_kv(chunk_kv.size()), d_out(q.size());
    DeviceBuffer<float> d_scratch(static_cast<size_t>(std::max<int64_t>(frank::cuda::attend_scratch_floats(n, H, hd), 1)));
    poison(d_scratch);
    DeviceBuffer<int32_t> d_sel(std::max<size_t>(selected.size(), 1));
    put(d_q, q);
    put(d_kv, chunk_kv);
    if (!selected.empty()) put(d_sel, selected);
    const int64_t* at = position.at(start);
    CUDA_OK(frank::cuda::attend(d_q.get(), n, H, hd, d_ring.get(), W, d_kv.get(), at, d_entries.get(), c.ratio,
                                c.k_sel > 0 ? d_sel.get() : nullptr, c.k_sel, d_sinks.get(), scale, d_out.get(),
                                d_scratch.get(), nullptr));
    CUDA_OK(frank::cuda::window_store(d_ring.get(), W, hd, d_kv.get(), n, at, nullptr));
    const auto got = get(d_out.get(), q.size());

    std::vector<float> want(q.size());
    for (int t = 0; t < n; ++t) {
      const int64_t pos = start + t;
      std::vector<const float*> keys;
      for (int64_t p = std::max<int64_t>(0, pos - W + 1); p <= pos; ++p) keys.push_back(kv_row(p));
      if (c.ratio > 0 && c.k_sel == 0)
        for (int64_t e = 0; e < (pos + 1) / c.ratio; ++e) keys.push_back(entries.data() + e * hd);
      for (int j = 0; c.ratio > 0 && j < c.k_sel; ++j)
        if (const int32_t e = selected[static_cast<size_t>(t) * c.k_sel + j]; e >= 0)
          keys.push_back(entries.data() + int64_t{e} * hd);
      for (int h = 0; h < H; ++h) {
        const size_t row = (static_cast<size_t>(t) * H + h) * hd;
        frank::engine::attend_with_sink(q.data() + row, keys, sinks[h], hd, scale, want.data() + row);
      }
    }
    err = std::max(err, max_scaled_error(got, want));
    start += n;
  }
  return report("attend", c.what, err, kTol);
}

// ---- compress_chunk -------------------------------------------------------------------------

struct CompressCase {
  const char* what;
  int ratio, dim, rope_dim;
  bool overlapping;
};

// Pushes the same token projections through the CPU Compressor one token at a time and through
// compress_chunk in chunks of varied sizes (closing no window, one, several; starting mid-window),
// comparing after every chunk the entries so far and the state (pending rows, overlap).
int check_compress(std::mt19937_64& rng, const CompressCase& c) {
  const int r = c.ratio, dim = c.dim, width = (c.overlapping ? 2 : 1) * dim;
  std::vector<int> chunks;
  for (int n : {1, 3, r - 1, r, 2 * r + 1, 1, r + 1, 2, 3 * r + 2, r - 1, 1, 2 * r})
    if (n > 0) chunks.push_back(n);
  const int64_t total = std::accumulate(chunks.begin(), chunks.end(), int64_t{0});

  frank::model::CompressorWeights w;
  w.position_bias = frank::Tensor({r, width}, random_vector(rng, static_cast<size_t>(r) * width, -1.f, 1.f));
  w.norm = frank::Tensor({dim}, random_vector(rng, dim, 0.5f, 1.5f));
  frank::model::RopeSpec spec;
  spec.theta = 160000.0;
  spec.yarn = true;
  spec.factor = 16.0;
  spec.original_max_position_embeddings = 65536;
  const frank::engine::RopeTable rope(spec, c.rope_dim);
  const float eps = 1e-6f;
  const frank::engine::Compressor cpu(w, r, dim, c.overlapping, eps, rope);
  frank::engine::CompressorState state;

  DeviceBuffer<float> pending_kv(static_cast<size_t>(r) * width), pending_gate(pending_kv.size());
  DeviceBuffer<float> overlap_kv(static_cast<size_t>(r) * dim), overlap_gate(overlap_kv.size());
  DeviceBuffer<float> entries(static_cast<size_t>(total / r + 1) * dim);
  DeviceBuffer<float> bias(w.position_bias.data.size()), norm(dim), inv_freq(rope.inv_freq().size());
  for (auto* b : {&pending_kv, &pending_gate, &overlap_kv, &overlap_gate, &entries}) poison(*b);
  put(bias, w.position_bias.data);
  put(norm, w.norm.data);
  put(inv_freq, rope.inv_freq());
  const CompressorBuffers buffers{pending_kv.get(), pending_gate.get(), overlap_kv.get(), overlap_gate.get(),
                                  entries.get()};

  double entry_err = 0.0, state_err = 0.0;
  int64_t start = 0;
  DevicePosition position;
  for (int n : chunks) {
    const auto kv = random_vector(rng, static_cast<size_t>(n) * width, -1.f, 1.f);
    const auto gate = random_vector(rng, static_cast<size_t>(n) * width, -3.f, 3.f);
    DeviceBuffer<float> d_kv(kv.size()), d_gate(gate.size());
    put(d_kv, kv);
    put(d_gate, gate);
    CUDA_OK(frank::cuda::compress_chunk(buffers, d_kv.get(), d_gate.get(), n, position.at(start), r, dim, c.overlapping,
                                        bias.get(), norm.get(), eps, inv_freq.get(),
                                        static_cast<int>(rope.inv_freq().size()), nullptr));
    for (int t = 0; t < n; ++t) cpu.push(state, kv.data() + int64_t{t} * width, gate.data() + int64_t{t} * width);
    start += n;

    entry_err = std::max(entry_err, max_scaled_error(get(entries.get(), state.entries.size()), state.entries));
    // Pending row j holds position (start / r) * r + j: the CPU state's j-th pending token.
    const size_t pending = static_cast<size_t>(state.pending) * width;
    state_err = std::max(state_err, max_scaled_error(get(pending_kv.get(), pending), state.pending_kv));
    state_err = std::max(state_err, max_scaled_error(get(pending_gate.get(), pending), state.pending_gate));
    if (c.overlapping && state.has_overlap) {
      state_err = std::max(state_err, max_scaled_error(get(overlap_kv.get(), overlap_kv.size()), state.overlap_kv));
      state_err = std::max(state_err, max_scaled_error(get(overlap_gate.get(), overlap_kv.size()), state.overlap_gate));
    }
  }
  const std::string what = c.what;
  int failures = report("compress_chunk", (what + " entries").c_str(), entry_err, kTol);
  if (state.n_entries != total / r) failures += report("compress_chunk", (what + " entry count").c_str(), 1.0, 0.0);
  // The state is copied (gates plus bias in the same fp32 addition): exact.
  return failures + report("compress_chunk", (what + " state").c_str(), state_err, 0.0);
}

// ---- indexer_scores -------------------------------------------------------------------------

struct IndexerCase {
  const char* what;
  int n, H, d, ratio, cols;
  int64_t start;
};

int check_indexer(std::mt19937_64& rng, const IndexerCase& c) {
  const auto q = random_vector(rng, static_cast<size_t>(c.n) * c.H * c.d, -1.f, 1.f);
  const auto w = random_vector(rng, static_cast<size_t>(c.n) * c.H, -0.125f, 0.125f);  // scaled by 1/sqrt(H)
  const auto keys = random_vector(rng, static_cast<size_t>(c.cols) * c.d, -1.f, 1.f);
  DeviceBuffer<float> d_q(q.size()), d_w(w.size()), d_keys(keys.size()), d_scores(static_cast<size_t>(c.n) * c.cols);
  put(d_q, q);
  put(d_w, w);
  put(d_keys, keys);
  poison(d_scores);
  DevicePosition position;
  CUDA_OK(frank::cuda::indexer_scores(d_q.get(), d_w.get(), c.n, c.H, c.d, d_keys.get(), position.at(c.start), c.ratio,
                                      c.cols, d_scores.get(), nullptr));
  const auto got = get(d_scores.get(), d_scores.size());

  // Columns past a row's visible count must be -inf exactly (max_scaled_error fails any other value).
  std::vector<float> want(got.size(), -std::numeric_limits<float>::infinity());
  for (int t = 0; t < c.n; ++t) {
    const int64_t visible = std::min<int64_t>((c.start + t + 1) / c.ratio, c.cols);
    const auto s = frank::engine::indexer_scores(q.data() + static_cast<size_t>(t) * c.H * c.d,
                                                 w.data() + static_cast<size_t>(t) * c.H, c.H, c.d, keys.data(),
                                                 visible);
    std::copy(s.begin(), s.end(), want.begin() + static_cast<size_t>(t) * c.cols);
  }
  return report("indexer_scores", c.what, max_scaled_error(got, want), kTol);
}

// ---- bad arguments --------------------------------------------------------------------------

int check_bad_arguments() {
  DeviceBuffer<float> buf(4096);
  float* p = buf.get();
  const CompressorBuffers b{p, p, p, p, p};
  DevicePosition position;
  const int64_t* at = position.at(0);
  const cudaError_t bad = cudaErrorInvalidValue;
  bool ok = frank::cuda::window_store(p, 0, 4, p, 1, at, nullptr) == bad;                           // W = 0
  ok &= frank::cuda::window_store(p, 8, 4, p, 1, nullptr, nullptr) == bad;                          // no position
  ok &= frank::cuda::attend(p, 1, 1, 516, p, 4, p, at, p, 0, nullptr, 0, p, 1.f, p, p, nullptr) == bad;  // hd > 512
  ok &= frank::cuda::attend(p, 1, 1, 6, p, 4, p, at, p, 0, nullptr, 0, p, 1.f, p, p, nullptr) == bad;    // hd % 4
  // A decode token of 64 heads takes several splits, which need scratch.
  ok &= frank::cuda::attend(p, 1, 64, 512, p, 128, p, at, p, 0, nullptr, 0, p, 1.f, p, nullptr, nullptr) == bad;
  ok &= frank::cuda::compress_chunk(b, p, p, 1, at, 0, 8, true, p, p, 1e-6f, p, 2, nullptr) == bad;    // ratio 0
  ok &= frank::cuda::compress_chunk(b, p, p, 1, at, 4, 8, true, p, p, 1e-6f, p, 5, nullptr) == bad;    // 2*pairs > dim
  ok &= frank::cuda::indexer_scores(p, p, 1, 1, 256, p, at, 4, 8, p, nullptr) == bad;                 // d > 128
  ok &= frank::cuda::indexer_scores(p, p, 1, 1, 8, p, at, 0, 8, p, nullptr) == bad;                   // ratio 0
  ok &= cudaGetLastError() == cudaSuccess;
  return report("attention ops", "bad arguments rejected", ok ? 0.0 : 1.0, 0.0);
}

}  // namespace

int check_attention_ops(uint64_t seed) {
  std::mt19937_64 rng(seed);
  int failures = 0;

  failures += check_window_store(rng, 8, 12, {1, 3, 20, 5, 8, 2}, "small W=8");
  failures += check_window_store(rng, 128, 512, {5, 129, 1, 128, 3, 300}, "real W=128 hd=512");

  // Chunks start at 0, then past W (window rows from the ring and the chunk), and include one longer
  // than the window. hd 100 leaves part of a warp's lanes idle. H = 4, 2, 3 take 4, 2, 1 heads per
  // warp; few tokens over many keys split them over blocks (the real decode and verify chunks).
  const std::vector<int> small_chunks = {1, 3, 13, 2, 8, 1, 5};
  const AttendCase attend_cases[] = {
      {"small sliding", 4, 64, 8, 0, 0, 0, small_chunks},
      {"small HCA r=4", 4, 64, 8, 4, 0, 0, small_chunks},
      {"small CSA r=4 k=6 hd=100", 3, 100, 8, 4, 6, 0, small_chunks},
      {"small HCA r=3 from 500", 2, 32, 8, 3, 0, 500, {1, 9, 2}},
      // Keys split over blocks with one head per warp; splits that see only empty slots.
      {"small CSA r=2 k=40 H=3 from 200", 3, 100, 8, 2, 40, 200, {1, 4}},
      {"small CSA r=4 k=64 from 20", 4, 64, 8, 4, 64, 20, {1, 2}},
      {"real sliding", 64, 512, 128, 0, 0, 0, {5, 129, 1, 3}},
      {"real HCA r=128 from 70000", 64, 512, 128, 128, 0, 70000, {1, 130, 2}},
      {"real CSA r=4 k=512 from 3000", 64, 512, 128, 4, 512, 3000, {1, 129, 4}},
  };
  for (const auto& c : attend_cases) failures += check_attend(rng, c);

  const CompressCase compress_cases[] = {
      {"CSA r=4 dim=128", 4, 128, 64, true},      {"CSA r=4 dim=512", 4, 512, 64, true},
      {"HCA r=128 dim=512", 128, 512, 64, false}, {"HCA r=3 dim=64", 3, 64, 16, false},
      {"CSA r=3 dim=48", 3, 48, 16, true},
  };
  for (const auto& c : compress_cases) failures += check_compress(rng, c);

  // Rows of different visible counts in one call; more heads than one pass; several token groups.
  const IndexerCase indexer_cases[] = {
      {"small n=7 H=5 d=36", 7, 5, 36, 4, 8, 9},
      {"small n=3 H=70 d=20", 3, 70, 20, 3, 150, 289},
      {"n=20 H=64 d=128 cols=2048", 20, 64, 128, 4, 2048, 4000},
      {"real n=5 cols=65536", 5, 64, 128, 4, 65536, 262139},
  };
  for (const auto& c : indexer_cases) failures += check_indexer(rng, c);

  failures += check_bad_arguments();
  return failures;
}

}  // namespace frank_test
