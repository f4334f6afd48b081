// Checks of the attention-state and attention ops (frank/cuda/attention.cu, compressor.cu,
// indexer.cu) against the CPU reference: engine::encode_kv_row (bit for bit), engine::attend_with_sink,
// engine::Compressor::push and engine::indexer_scores. Every K=V row op runs in each row format.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cuda_util.h"
#include "frank/cuda/ops.cuh"
#include "frank/engine/attention.h"
#include "frank/engine/compressor.h"
#include "frank/engine/indexer.h"
#include "frank/engine/kv_record.h"
#include "frank/engine/rope.h"
#include "ops_check.h"

namespace frank_test {
namespace {

using frank::cuda::CompressorBuffers;
using frank::engine::KvFormat;
using frank::engine::KvRowLayout;
using frank::engine::kv_row_layout;

constexpr double kTol = 1e-4;  // fp32 accumulation against the double-accumulating reference
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr KvFormat kFormats[] = {KvFormat::F32, KvFormat::BF16, KvFormat::FP8};

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

std::string named(const char* what, KvFormat f) { return std::string(what) + " " + frank::engine::kv_format_name(f); }

// The CPU reference records of rows [n, l.dim], and their values decoded back.
std::vector<uint8_t> cpu_records(const float* rows, size_t n, const KvRowLayout& l) {
  std::vector<uint8_t> out(n * static_cast<size_t>(l.row_bytes));
  for (size_t t = 0; t < n; ++t)
    frank::engine::encode_kv_row(l, std::span<const float>(rows + t * l.dim, static_cast<size_t>(l.dim)),
                                 std::span<uint8_t>(out.data() + t * l.row_bytes, static_cast<size_t>(l.row_bytes)));
  return out;
}
std::vector<float> cpu_decoded(const std::vector<uint8_t>& records, const KvRowLayout& l) {
  const size_t n = records.size() / static_cast<size_t>(l.row_bytes);
  std::vector<float> out(n * static_cast<size_t>(l.dim));
  for (size_t t = 0; t < n; ++t)
    frank::engine::decode_kv_row(
        l, std::span<const uint8_t>(records.data() + t * l.row_bytes, static_cast<size_t>(l.row_bytes)),
        std::span<float>(out.data() + t * l.dim, static_cast<size_t>(l.dim)));
  return out;
}

// The number of bytes that differ (a bit-for-bit check reports it as its error, tolerance 0).
double differing_bytes(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  if (got.size() != want.size()) return INFINITY;
  double n = 0;
  for (size_t i = 0; i < got.size(); ++i) n += got[i] != want[i];
  return n;
}

// ---- kv_encode --------------------------------------------------------------------------------

// Rows that reach every branch of the encoder: normal rows, zeros and negative zeros, blocks under
// the 1e-4 amax floor, blocks whose max is exactly 448 * 2^k (x / s reaches 448), e4m3 rounding
// ties and subnormals, binades from 1e-6 to 1e6, bf16 ties.
std::vector<float> encoder_rows(std::mt19937_64& rng, int rows, int dim) {
  std::vector<float> v = random_vector(rng, static_cast<size_t>(rows) * dim, -3.f, 3.f);
  const float midpoints[] = {1.0625f, 1.1875f, 17.f, 19.f, 0x1p-10f, 0x3p-10f, 0x5p-10f, 0x1p-11f};
  std::uniform_int_distribution<int> pick(0, 7), binade(-20, 20);
  for (int r = 0; r < rows; ++r) {
    float* row = v.data() + static_cast<int64_t>(r) * dim;
    switch (r % 6) {
      case 0: std::fill(row, row + dim, r % 12 == 0 ? 0.f : -0.f); break;
      case 1: for (int i = 0; i < dim; ++i) row[i] *= 3e-5f; break;
      case 2:
        for (int i = 0; i < dim; ++i) row[i] = (i % 2 ? -0.125f : 0.125f) * midpoints[pick(rng)];
        row[0] = 448.f * 0.125f;
        break;
      case 3: for (int i = 0; i < dim; ++i) row[i] = std::ldexp(row[i], binade(rng)); break;
      case 4: for (int i = 0; i < dim; ++i) row[i] = std::bit_cast<float>(0x3F808000u + (i % 2) * 0x10000u); break;
      default: break;
    }
  }
  return v;
}

int check_kv_encode(std::mt19937_64& rng, int dim, int rope_dims, int rows) {
  int failures = 0;
  const auto values = encoder_rows(rng, rows, dim);
  DeviceBuffer<float> d_values(values.size());
  put(d_values, values);
  for (KvFormat f : kFormats) {
    const KvRowLayout l = kv_row_layout(f, dim, rope_dims);
    DeviceBuffer<uint8_t> d_records(static_cast<size_t>(rows) * l.row_bytes);
    poison(d_records);
    CUDA_OK(frank::cuda::kv_encode(d_values.get(), rows, l, d_records.get(), nullptr));
    const auto want = cpu_records(values.data(), static_cast<size_t>(rows), l);
    const std::string what = named(("dim " + std::to_string(dim) + "/" + std::to_string(rope_dims)).c_str(), f);
    failures += report("kv_encode", (what + " bytes differing").c_str(),
                       differing_bytes(get(d_records.get(), want.size()), want), 0.0);
  }
  return failures;
}

// ---- window_store ---------------------------------------------------------------------------

int check_window_store(std::mt19937_64& rng, int W, int hd, int rope_dims, const std::vector<int>& chunks,
                       const char* what) {
  int failures = 0;
  for (KvFormat f : kFormats) {
    const KvRowLayout l = kv_row_layout(f, hd, rope_dims);
    std::vector<uint8_t> ring(static_cast<size_t>(W) * l.row_bytes, 0);
    DeviceBuffer<uint8_t> d_ring(ring.size());
    put(d_ring, ring);
    double err = 0.0;
    int64_t start = 0;
    DevicePosition position;
    for (int n : chunks) {
      const auto kv = random_vector(rng, static_cast<size_t>(n) * hd, -1.f, 1.f);
      DeviceBuffer<float> d_kv(kv.size());
      put(d_kv, kv);
      CUDA_OK(frank::cuda::window_store(d_ring.get(), W, l, d_kv.get(), n, position.at(start), nullptr));
      const auto records = cpu_records(kv.data(), static_cast<size_t>(n), l);
      for (int t = 0; t < n; ++t)
        std::copy_n(records.begin() + int64_t{t} * l.row_bytes, l.row_bytes,
                    ring.begin() + ((start + t) % W) * l.row_bytes);
      err = std::max(err, differing_bytes(get(d_ring.get(), ring.size()), ring));
      start += n;
    }
    failures += report("window_store", (named(what, f) + " bytes differing").c_str(), err, 0.0);  // bit for bit
  }
  return failures;
}

// ---- attend ---------------------------------------------------------------------------------

struct AttendCase {
  const char* what;
  int H, hd, rope_dims, W;
  int ratio;   // 0: sliding only
  int k_sel;   // > 0: CSA (a selection per token), 0: HCA (every visible entry)
  int64_t first;  // position of the first chunk
  std::vector<int> chunks;
};

// Runs the case's chunks in order through attend, which then stores the chunk's rows into the ring
// (RingStore, as a layer does), with K=V rows stored in format f, and compares every output with
// attend_with_sink over the key list the contract defines, the keys being the CPU encoder's records
// decoded (the same values the kernel must dequantise, so the tolerance is fp32 accumulation's
// whatever the format), then RoPE undone; and the ring after each chunk with the CPU encoder's
// records, bit for bit.
int check_attend(std::mt19937_64& rng, const AttendCase& c, KvFormat f) {
  const int H = c.H, hd = c.hd, W = c.W;
  const KvRowLayout l = kv_row_layout(f, hd, c.rope_dims);
  const size_t rb = static_cast<size_t>(l.row_bytes);
  const int64_t total = std::accumulate(c.chunks.begin(), c.chunks.end(), int64_t{0});
  const int64_t end = c.first + total, oldest = std::max<int64_t>(0, c.first - W);
  // K=V rows of every position the case can see (stored and decoded), ring rows of the positions
  // before the first chunk.
  const auto history = random_vector(rng, static_cast<size_t>(end - oldest) * hd, -1.f, 1.f);
  const auto history_records = cpu_records(history.data(), static_cast<size_t>(end - oldest), l);
  const auto history_keys = cpu_decoded(history_records, l);
  auto key_row = [&](int64_t p) { return history_keys.data() + (p - oldest) * hd; };
  auto record = [&](int64_t p) { return history_records.begin() + (p - oldest) * static_cast<int64_t>(rb); };
  std::vector<uint8_t> ring(static_cast<size_t>(W) * rb, 0xff);
  for (int64_t p = oldest; p < c.first; ++p) std::copy_n(record(p), rb, ring.begin() + (p % W) * rb);
  const int64_t n_entries = c.ratio > 0 ? end / c.ratio + 1 : 1;
  const auto entry_values = random_vector(rng, static_cast<size_t>(n_entries) * hd, -1.f, 1.f);
  const auto entries = cpu_records(entry_values.data(), static_cast<size_t>(n_entries), l);
  const auto entry_keys = cpu_decoded(entries, l);
  const auto sinks = random_vector(rng, H, -2.f, 4.f);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const frank::engine::RopeTable rope(frank::model::RopeSpec{10000.0}, c.rope_dims);
  const int pairs = c.rope_dims / 2;

  DeviceBuffer<uint8_t> d_ring(ring.size()), d_entries(entries.size());
  DeviceBuffer<float> d_sinks(H), d_inv_freq(pairs);
  put(d_ring, ring);
  put(d_entries, entries);
  put(d_sinks, sinks);
  put(d_inv_freq, rope.inv_freq());

  double err = 0.0, ring_err = 0.0;
  int64_t start = c.first;
  DevicePosition position;
  for (int n : c.chunks) {
    // Queries of a few units per element, so the logits spread over several units.
    const auto q = random_vector(rng, static_cast<size_t>(n) * H * hd, -3.f, 3.f);
    const std::vector<float> chunk_kv(history.begin() + (start - oldest) * hd,
                                      history.begin() + (start + n - oldest) * hd);
    const std::vector<uint8_t> chunk_rows(record(start), record(start + n));
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
    DeviceBuffer<uint8_t> d_chunk_rows(chunk_rows.size());
    DeviceBuffer<float> d_scratch(static_cast<size_t>(std::max<int64_t>(frank::cuda::attend_scratch_floats(n, H, hd), 1)));
    poison(d_scratch);
    DeviceBuffer<int32_t> d_sel(std::max<size_t>(selected.size(), 1));
    put(d_q, q);
    put(d_kv, chunk_kv);
    put(d_chunk_rows, chunk_rows);
    if (!selected.empty()) put(d_sel, selected);
    const int64_t* at = position.at(start);
    CUDA_OK(frank::cuda::attend(d_q.get(), n, H, l, d_ring.get(), W, d_chunk_rows.get(), at, d_entries.get(), c.ratio,
                                c.k_sel > 0 ? d_sel.get() : nullptr, c.k_sel, d_sinks.get(), scale,
                                d_inv_freq.get(), pairs, d_out.get(), d_scratch.get(), nullptr,
                                {d_ring.get(), d_kv.get()}));
    const auto got = get(d_out.get(), q.size());
    for (int64_t p = std::max(start, start + n - W); p < start + n; ++p)
      std::copy_n(record(p), rb, ring.begin() + (p % W) * static_cast<int64_t>(rb));
    ring_err = std::max(ring_err, differing_bytes(get(d_ring.get(), ring.size()), ring));

    std::vector<float> want(q.size());
    for (int t = 0; t < n; ++t) {
      const int64_t pos = start + t;
      std::vector<const float*> keys;
      for (int64_t p = std::max<int64_t>(0, pos - W + 1); p <= pos; ++p) keys.push_back(key_row(p));
      if (c.ratio > 0 && c.k_sel == 0)
        for (int64_t e = 0; e < (pos + 1) / c.ratio; ++e) keys.push_back(entry_keys.data() + e * hd);
      for (int j = 0; c.ratio > 0 && j < c.k_sel; ++j)
        if (const int32_t e = selected[static_cast<size_t>(t) * c.k_sel + j]; e >= 0)
          keys.push_back(entry_keys.data() + int64_t{e} * hd);
      for (int h = 0; h < H; ++h) {
        const size_t row = (static_cast<size_t>(t) * H + h) * hd;
        frank::engine::attend_with_sink(q.data() + row, keys, sinks[h], hd, scale, want.data() + row);
        rope.apply(want.data() + row, hd, pos, /*inverse=*/true);
      }
    }
    err = std::max(err, max_scaled_error(got, want));
    start += n;
  }
  return report("attend", named(c.what, f).c_str(), err, kTol) +
         report("attend", (named(c.what, f) + " ring bytes differing").c_str(), ring_err, 0.0);  // bit for bit
}

// ---- compress_chunk -------------------------------------------------------------------------

struct CompressCase {
  const char* what;
  int ratio, dim, rope_dim;
  bool overlapping;
};

// One compressor's device state with its entries stored as `layout` records.
struct DeviceCompressor {
  KvRowLayout layout;
  DeviceBuffer<float> pending_kv, pending_gate, overlap_kv, overlap_gate;
  DeviceBuffer<uint8_t> entries;
  DeviceCompressor(const KvRowLayout& l, int r, int width, int64_t capacity)
      : layout(l),
        pending_kv(static_cast<size_t>(r) * width),
        pending_gate(pending_kv.size()),
        overlap_kv(static_cast<size_t>(r) * l.dim),
        overlap_gate(overlap_kv.size()),
        entries(static_cast<size_t>(capacity) * l.row_bytes) {
    poison(pending_kv);
    poison(pending_gate);
    poison(overlap_kv);
    poison(overlap_gate);
    poison(entries);
  }
  CompressorBuffers buffers() const {
    return {pending_kv.get(), pending_gate.get(), overlap_kv.get(), overlap_gate.get(), entries.get()};
  }
};

// Pushes the same token projections through the CPU Compressor one token at a time and through
// compress_chunk in chunks of varied sizes (closing no window, one, several; starting mid-window),
// comparing after every chunk the entries so far and the state (pending rows, overlap). Entries
// are stored in every format from the same inputs: fp32 entries against the CPU Compressor; bf16
// and fp8 entries bit for bit against the CPU encoder applied to the GPU's fp32 entries (the
// kernel computes an entry once, then stores it through the format).
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

  std::vector<std::unique_ptr<DeviceCompressor>> devices;  // devices[0] stores fp32 entries
  for (KvFormat f : kFormats)
    devices.push_back(std::make_unique<DeviceCompressor>(kv_row_layout(f, dim, c.rope_dim), r, width, total / r + 1));
  const DeviceCompressor& f32 = *devices.front();
  DeviceBuffer<float> bias(w.position_bias.data.size()), norm(dim), inv_freq(rope.inv_freq().size());
  put(bias, w.position_bias.data);
  put(norm, w.norm.data);
  put(inv_freq, rope.inv_freq());

  double entry_err = 0.0, state_err = 0.0;
  std::vector<double> record_err(devices.size(), 0.0);
  int64_t start = 0;
  DevicePosition position;
  for (int n : chunks) {
    const auto kv = random_vector(rng, static_cast<size_t>(n) * width, -1.f, 1.f);
    const auto gate = random_vector(rng, static_cast<size_t>(n) * width, -3.f, 3.f);
    DeviceBuffer<float> d_kv(kv.size()), d_gate(gate.size());
    put(d_kv, kv);
    put(d_gate, gate);
    for (const auto& d : devices)
      CUDA_OK(frank::cuda::compress_chunk(d->buffers(), d_kv.get(), d_gate.get(), n, position.at(start), r, dim,
                                          c.overlapping,
                                          bias.get(), norm.get(), eps, inv_freq.get(),
                                          static_cast<int>(rope.inv_freq().size()), d->layout, nullptr));
    for (int t = 0; t < n; ++t) cpu.push(state, kv.data() + int64_t{t} * width, gate.data() + int64_t{t} * width);
    start += n;

    const auto f32_bytes = get(f32.entries.get(), state.entries.size() * sizeof(float));
    std::vector<float> gpu_entries(state.entries.size());
    std::memcpy(gpu_entries.data(), f32_bytes.data(), f32_bytes.size());
    entry_err = std::max(entry_err, max_scaled_error(gpu_entries, state.entries));
    for (size_t i = 1; i < devices.size(); ++i) {
      const auto want = cpu_records(gpu_entries.data(), static_cast<size_t>(state.n_entries), devices[i]->layout);
      record_err[i] = std::max(record_err[i], differing_bytes(get(devices[i]->entries.get(), want.size()), want));
    }
    // Pending row j holds position (start / r) * r + j: the CPU state's j-th pending token.
    const size_t pending = static_cast<size_t>(state.pending) * width;
    state_err = std::max(state_err, max_scaled_error(get(f32.pending_kv.get(), pending), state.pending_kv));
    state_err = std::max(state_err, max_scaled_error(get(f32.pending_gate.get(), pending), state.pending_gate));
    if (c.overlapping && state.has_overlap) {
      state_err = std::max(state_err, max_scaled_error(get(f32.overlap_kv.get(), f32.overlap_kv.size()), state.overlap_kv));
      state_err =
          std::max(state_err, max_scaled_error(get(f32.overlap_gate.get(), f32.overlap_kv.size()), state.overlap_gate));
    }
  }
  const std::string what = c.what;
  int failures = report("compress_chunk", (what + " entries").c_str(), entry_err, kTol);
  for (size_t i = 1; i < devices.size(); ++i)
    failures += report("compress_chunk", (named(c.what, kFormats[i]) + " records, bytes differing").c_str(),
                       record_err[i], 0.0);
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
                                      c.cols,
                                      d_scores.get(), nullptr));
  const auto got = get(d_scores.get(), d_scores.size());

  // Columns past a row's visible count must be -inf exactly (max_scaled_error fails any other value).
  std::vector<float> want(got.size(), -std::numeric_limits<float>::infinity());
  for (int t = 0; t < c.n; ++t) {
    // ratio 0 (V4.1's index_scores): every column.
    const int64_t visible = c.ratio > 0 ? std::min<int64_t>((c.start + t + 1) / c.ratio, c.cols) : c.cols;
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
  uint8_t* u = reinterpret_cast<uint8_t*>(p);
  const CompressorBuffers b{p, p, p, p, u};
  const cudaError_t bad = cudaErrorInvalidValue;
  DevicePosition position;
  const int64_t* at = position.at(0);
  const KvRowLayout l8 = kv_row_layout(KvFormat::F32, 8, 4), l516 = kv_row_layout(KvFormat::FP8, 516, 64);
  const KvRowLayout l512 = kv_row_layout(KvFormat::F32, 512, 64);
  KvRowLayout l6 = l8;  // a layout kv_row_layout refuses to make
  l6.dim = 6;
  bool ok = frank::cuda::window_store(u, 0, l8, p, 1, at, nullptr) == bad;                              // W = 0
  ok &= frank::cuda::window_store(u, 8, l8, p, 1, nullptr, nullptr) == bad;                             // no position
  ok &= frank::cuda::kv_encode(p, 1, l6, u, nullptr) == bad;                                            // dim % 4
  const auto attend_one = [&](const KvRowLayout& l, int pairs) {
    return frank::cuda::attend(p, 1, 1, l, u, 4, u, at, u, 0, nullptr, 0, p, 1.f, p, pairs, p, p, nullptr);
  };
  ok &= attend_one(l516, 0) == bad;  // hd > 512
  ok &= attend_one(l6, 0) == bad;    // hd % 4
  ok &= attend_one(l8, 1) == bad;    // a RoPE pair split over two float4s
  // A decode token of 64 heads takes several splits, which need scratch.
  ok &= frank::cuda::attend(p, 1, 64, l512, u, 128, u, at, u, 0, nullptr, 0, p, 1.f, p, 32, p, nullptr, nullptr) == bad;
  // The ring attend stores into must be the one it reads, and rows must be given.
  ok &= frank::cuda::attend(p, 1, 1, l8, u, 4, u, at, u, 0, nullptr, 0, p, 1.f, p, 0, p, p, nullptr, {u + 64, p}) == bad;
  ok &= frank::cuda::attend(p, 1, 1, l8, u, 4, u, at, u, 0, nullptr, 0, p, 1.f, p, 0, p, p, nullptr, {u, nullptr}) == bad;
  ok &= frank::cuda::compress_chunk(b, p, p, 1, at, 0, 8, true, p, p, 1e-6f, p, 2, l8, nullptr) == bad;  // ratio 0
  ok &= frank::cuda::compress_chunk(b, p, p, 1, at, 4, 8, true, p, p, 1e-6f, p, 5, l8, nullptr) == bad;  // 2*pairs > dim
  ok &= frank::cuda::compress_chunk(b, p, p, 1, at, 4, 8, true, p, p, 1e-6f, p, 1, l8, nullptr) == bad;  // layout's RoPE dims
  ok &= frank::cuda::indexer_scores(p, p, 1, 1, 256, p, at, 4, 8, p, nullptr) == bad;                 // d > 128
  ok &= frank::cuda::indexer_scores(p, p, 1, 1, 8, p, at, -1, 8, p, nullptr) == bad;                  // ratio < 0
  ok &= cudaGetLastError() == cudaSuccess;
  return report("attention ops", "bad arguments rejected", ok ? 0.0 : 1.0, 0.0);
}

}  // namespace

int check_attention_ops(uint64_t seed) {
  std::mt19937_64 rng(seed);
  int failures = 0;

  // The encoder alone: DeepSeek-V4's rows, the tiny models' (one short block), a short last block.
  failures += check_kv_encode(rng, 512, 64, 300);
  failures += check_kv_encode(rng, 32, 8, 60);
  failures += check_kv_encode(rng, 200, 64, 60);

  failures += check_window_store(rng, 8, 12, 4, {1, 3, 20, 5, 8, 2}, "small W=8");
  failures += check_window_store(rng, 128, 512, 64, {5, 129, 1, 128, 3, 300}, "real W=128 hd=512");

  // Chunks start at 0, then past W (window rows from the ring and the chunk), and include one longer
  // than the window. hd 100 leaves part of a warp's lanes idle (and its fp8 record a short block).
  // H = 4, 2, 3 take 4, 2, 1 heads per warp; few tokens over many keys split them over blocks (the
  // real decode and verify chunks).
  const std::vector<int> small_chunks = {1, 3, 13, 2, 8, 1, 5};
  const AttendCase attend_cases[] = {
      {"small sliding", 4, 64, 16, 8, 0, 0, 0, small_chunks},
      {"small HCA r=4", 4, 64, 16, 8, 4, 0, 0, small_chunks},
      {"small CSA r=4 k=6 hd=100", 3, 100, 20, 8, 4, 6, 0, small_chunks},
      {"small HCA r=3 from 500", 2, 32, 8, 8, 3, 0, 500, {1, 9, 2}},
      // Keys split over blocks with one head per warp; splits that see only empty slots.
      {"small CSA r=2 k=40 H=3 from 200", 3, 100, 20, 8, 2, 40, 200, {1, 4}},
      {"small CSA r=4 k=64 from 20", 4, 64, 16, 8, 4, 64, 20, {1, 2}},
      {"real sliding", 64, 512, 64, 128, 0, 0, 0, {5, 129, 1, 3}},
      {"real HCA r=128 from 70000", 64, 512, 64, 128, 128, 0, 70000, {1, 130, 2}},
      {"real CSA r=4 k=512 from 3000", 64, 512, 64, 128, 4, 512, 3000, {1, 129, 4}},
  };
  for (const auto& c : attend_cases)
    for (KvFormat f : kFormats)
      if (c.H < 64 || f != KvFormat::BF16) failures += check_attend(rng, c, f);  // real shapes: fp32 and fp8

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
      {"V4.1 all columns n=3 cols=300", 3, 16, 128, 0, 300, 5},
      // A key tile that the group's first tokens skip and its later ones score (tokens 4.. see col 64).
      {"tokens crossing a tile n=12 cols=256", 12, 64, 128, 4, 256, 251},
      // d not a multiple of 4: element loads instead of 16-byte ones; two runs of heads.
      {"odd depth n=9 H=66 d=30", 9, 66, 30, 2, 100, 150},
  };
  for (const auto& c : indexer_cases) failures += check_indexer(rng, c);

  failures += check_bad_arguments();
  return failures;
}

}  // namespace frank_test
