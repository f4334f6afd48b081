#pragma once
// The CUDA ops DeepSeek-V4.1 adds to V4's (ops.cuh): single-pass mHC, the quantisation rounding
// transformers bakes into the forward, Engram, the KV sources' pooling, and the indexer's two-level
// top-k. Same conventions as ops.cuh: host-side launchers, asynchronous on `stream`, no host
// synchronisation, no allocation; every pointer is device memory; positions are read from a device
// int64_t when the kernels run. Each op computes what the CPU reference function named under it
// computes (engine::CpuOps' V4.1 ops, cpu_ops_v41.cpp); tests/cuda/ops_check_v41.cpp and
// tests/cuda/v41_topk_check.cpp check them against it.
#include <cstdint>

#include <cuda_runtime.h>

#include "frank/cuda/ops.cuh"
#include "frank/engine/fake_quant.h"

namespace frank::cuda {

// ---- single-pass mHC (hyper_connection.cu) --------------------------------------------------

// hc_pre's mapping without the collapse: mix[t] = [pre (N) | post (N) | Sinkhorn(comb) (N*N)] of
// each token's streams [n, N*D], exactly as hc_pre (ops.cuh) writes mix. Its kernel is hc_pre's,
// with its arrival counters and a static scratch for the split sums: not concurrently with hc_pre,
// hc_head or another hc_map (calls on one stream never are). engine::CpuOps::hc_map.
cudaError_t hc_map(const float* streams, int n, int N, int D, const float* fn, const float* base, const float* scale,
                   int sinkhorn_iters, float hc_eps, float norm_eps, float* mix, cudaStream_t stream);

// Rows t in [first, n): out[t - first][d] = RMSNorm(sum_j pre[j] * streams[t][j*D + d]) * norm_weight
// with pre = mix[t][0..N) (mix [n, 2N + N*N] as hc_map writes it), or stream 0 exactly when mix is
// null; norm over D with norm_eps. out [n - first, D]. engine::CpuOps::hc_collapse.
cudaError_t hc_collapse(const float* streams, int n, int N, int D, const float* mix, int first,
                        const float* norm_weight, float norm_eps, float* out, cudaStream_t stream);

// hc_collapse without the norm: out[t - first] = sum_j pre[j] * streams[t][j*D ..] (DSpark's h,
// dsv41-model.md §8). engine::CpuOps::hc_sum.
cudaError_t hc_sum(const float* streams, int n, int N, int D, const float* mix, int first, float* out,
                   cudaStream_t stream);

// ---- DSpark's block attention (attention.cu) -------------------------------------------------

// attend (ops.cuh) for the n rows of DSpark's draft block at positions *start .. (dsv41-model.md
// §8): every row's keys are the ring's rows of positions [max(0, *start - W), *start) and all n
// block_rows (bidirectional), records of `layout`; sink, scale, inverse RoPE at the row's own
// position and scratch (attend_scratch_floats) as attend's. engine::CpuOps::attend_block.
cudaError_t attend_block(const float* q, int n, int H, const KvRowLayout& layout, const uint8_t* ring, int W,
                         const uint8_t* block_rows, const int64_t* start, const float* sinks, float scale,
                         const float* inv_freq, int pairs, float* out, float* scratch, cudaStream_t stream);

// ---- rounding and small dense ops (v41_ops.cu) ------------------------------------------------

// x [count] in pieces of `width` (count % width == 0), each rounded in place as
// engine::fake_quant(piece, width, grid, block) rounds it, bit for bit (a width that is not a
// multiple of block is left as it is). engine::CpuOps::fake_quant.
cudaError_t fake_quant(float* x, int64_t count, int width, engine::FakeQuant grid, int block, cudaStream_t stream);

// The rows of an Engram table [table_rows, head_dim] that row_ids [count] name, one after another:
// out [count, head_dim]. Ids are checked on the host before upload (engine::engram_gather's error);
// an id outside [0, table_rows) here writes zeros. engine::engram_gather.
cudaError_t engram_gather(const float* table, int64_t table_rows, int head_dim, const int64_t* row_ids, int64_t count,
                          float* out, cudaStream_t stream);

// For each token t < n, with kv[t] = [key_0 | .. | key_{N-1} | value] ([n, (N+1)*D], wkv · gathered)
// and X_k = streams[t][k*D ..]: the gated add of engine::engram_mix into each of the N streams, in
// place (q_weight, k_weight [N, D]). engine::engram_mix.
cudaError_t engram_mix(float* streams, int n, int N, int D, const float* kv, const float* q_weight,
                       const float* k_weight, float eps, cudaStream_t stream);

// A ratio-2 (gated) KV source's pooling of a chunk of n tokens at positions *start ..: kv, gate
// [n, dim]. Groups are `ratio` consecutive positions starting at multiples of ratio; a group's
// rows at positions before *start are in pending_kv / pending_gate [ratio, dim] (row = position %
// ratio, written by earlier calls). For every group the chunk closes, g = *start/ratio ..
// (*start+n)/ratio - 1, latents[g - *start/ratio][d] = sum_j kv_j[d] * softmax_j(gate_j[d]) in fp32,
// exactly as engine::CpuOps::pool_groups (max-subtracted, e_j / sum multiplied into each term, summed
// in j order). Then pending holds the chunk's rows of the group left open. latents has room for
// `max_groups` rows; rows past the groups closed are not written (nor groups past max_groups).
cudaError_t pool_groups(float* pending_kv, float* pending_gate, const float* kv, const float* gate, int n,
                        const int64_t* start, int ratio, int dim, float* latents, int max_groups, cudaStream_t stream);

// ---- the indexer's two-level top-k (v41_topk.cu) ---------------------------------------------
// scores [n, cols]: one row per token of the chunk (positions *start + t); token t reaches the
// entries e < visible_t = min((*start + t + 1) / ratio, cols). Scores of reachable entries are
// finite or -inf; anything past visible_t is ignored. Scores are ranked as the reference's float
// comparisons rank them: +0 and -0 are equal (the lower index wins), subnormals are ordinary
// values. A NaN is never selected and never raises a block (as -inf; the reference's block maximum
// ignores it, its entry sort has no order for it). n <= 65,535; topk and topk_blocks at most 4,096
// (select_row's pool); a launch outside these returns cudaErrorInvalidValue.

// Level 1 (engine::select_candidate_blocks per row): blocks [n, topk_blocks], the chosen blocks of
// `block_size` consecutive entries in ascending order, then -1 for the slots left (a block with no
// reachable entry is never chosen; the block of the newest reachable entry always is).
cudaError_t candidate_blocks(const float* scores, int n, int cols, const int64_t* start, int ratio, int topk_blocks,
                             int block_size, int32_t* blocks, cudaStream_t stream);

// The per-entry mask [n, cols] of level 1's blocks, chosen over the candidate source's
// `block_cols` entries: 1 for e < block_cols inside a chosen block (entries past visible_t
// included, as the CPU reference's mask marks them), 0 elsewhere, so entries at or past block_cols
// (published by a later KV source of the same call) are outside every block, as in CpuOps.
cudaError_t candidate_mask(const int32_t* blocks, int n, int topk_blocks, int block_size, int block_cols, int cols,
                           uint8_t* mask, cudaStream_t stream);

// Level 2 (engine::select_topk_entries per row): selected [n, topk], the top min(topk, cols)
// reachable entries of each row (inside mask's 1s when mask is not null), ascending by entry index,
// then -1 for the slots left. Equal scores prefer the lower index; -inf is never selected.
cudaError_t select_entries(const float* scores, int n, int cols, const int64_t* start, int ratio,
                           const uint8_t* mask, int topk, int32_t* selected, cudaStream_t stream);

// Level 2 inside level 1's blocks in one launch: each row gathers the scores of its chosen blocks
// only (topk_blocks * block_size entries, not cols) and selects among them. Byte-identical to
// candidate_mask followed by select_entries with that mask, for blocks as candidate_blocks writes
// them (ascending, distinct, then -1; the chosen ones are the slots before the first -1).
cudaError_t select_entries_in_blocks(const float* scores, int n, int cols, const int64_t* start, int ratio,
                                     const int32_t* blocks, int topk_blocks, int block_size, int block_cols,
                                     int topk, int32_t* selected, cudaStream_t stream);

}  // namespace frank::cuda
