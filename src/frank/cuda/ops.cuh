#pragma once
// The CUDA ops of the DeepSeek-V4 forward pass: host-side launchers, each asynchronous on `stream`
// (no host synchronisation, no allocation, so a step made of them can be captured in a CUDA graph).
// Every pointer is device memory. Activations and state are fp32, row-major; Linear weights are
// fp32 (exactness tests), bf16 (serving), or FP8 / FP4 as the checkpoint ships them
// (weight_format.h), always accumulated in fp32.
//
// Each op computes what the CPU reference computes (the function named under it); the reference
// accumulates in double, these in fp32, so they agree to rounding (tests/cuda/ops_check_*.cpp).
// A launcher returns the launch error, or cudaErrorInvalidValue for arguments it cannot serve.
//
// Positions: a chunk's first position (`start`, `first_position`) is passed as a pointer to one
// int64_t in device memory, which the kernels read when they run. Nothing the launcher decides (grid
// sizes, which kernels run) depends on it, so one step captured as a CUDA graph replays at any
// position once the caller writes the new position there (cuda::CudaModel's decode graphs).
#include <cstdint>

#include <cuda_runtime.h>

#include "frank/cuda/weight_format.h"
#include "frank/engine/kv_record.h"

namespace frank::cuda {

using engine::KvFormat;
using engine::KvRowLayout;

// ---- dense ops (dense_ops.cu) ---------------------------------------------------------------

// y[t*ldy + o] = sum_i W[o*in + i] * x[t*ldx + i] for t < n, o < out. W is [out, in] row-major, of
// type `wt` (its buffer laid out as weight_format.h says; FP4 needs in % 32 == 0). Strides let a
// caller run on column slices of x and y. cpu::linear; cpu::quantized_linear_rows for FP8 / FP4,
// whose weights are decoded in registers to their exact values (e4m3 / e2m1 times a power of two),
// so the result is that of the fp32 GEMV over cpu::dequantize's weights. Not served: scale bytes
// >= 247 (FP8) / 241 (FP4), blocks of weights near 2^110 and up, which give inf; NaN codes
// (fp8_fp4_decode.h).
cudaError_t linear(const float* x, int64_t ldx, int n, const void* w, WeightType wt, int64_t out, int64_t in, float* y,
                   int64_t ldy, cudaStream_t stream);

// Several weights of one type applied to the same x in one launch (the projections of a layer's
// input: fewer, larger launches than one linear each): outputs[s].y[t*ldy + o] =
// sum_i outputs[s].w[o*in + i] * x[t*ldx + i] for t < n, o < outputs[s].out. 1 <= count <=
// kMaxLinearOutputs. Each output is what linear computes (any weight type linear takes).
constexpr int kMaxLinearOutputs = 8;
struct LinearOutput {
  const void* w;
  int64_t out;
  float* y;
  int64_t ldy;
};
cudaError_t linears(const float* x, int64_t ldx, int n, int64_t in, WeightType wt, const LinearOutput* outputs,
                    int count, cudaStream_t stream);

// The grouped output projection in one launch: group g < groups applies its `rows` rows of W to its
// own `in` columns of x, y[t*ldy + g*rows + r] = sum_i W[(g*rows + r)*in + i] * x[t*ldx + g*in + i]
// for t < n, r < rows. W is [groups*rows, in] row-major, of type `wt` (an FP8 weight's blocks
// span the whole [groups*rows, in] matrix, as shipped); ldx >= groups*in, ldy >= groups*rows.
// engine::CpuOps::grouped_linear.
cudaError_t linear_grouped(const float* x, int64_t ldx, int n, const void* w, WeightType wt, int groups, int64_t rows,
                           int64_t in, float* y, int64_t ldy, cudaStream_t stream);

// Each of `rows` contiguous rows of `width` values in place: x * 1/sqrt(mean(x^2) + eps), then
// times weight[i] when weight is not null. cpu::rms_norm.
cudaError_t rms_norm(float* x, int64_t rows, int width, const float* weight, float eps, cudaStream_t stream);

// RoPE on x [n, heads*dim]: row t is at position (*first_position / stride + t) * stride (stride 1:
// *first_position + t; DeepSeek-V4.1's compressed groups g = start/ratio .. sit at g * ratio, so
// the session position and stride = ratio give them); in each head the last 2*pairs values rotate
// in interleaved pairs (x[2i], x[2i+1]) by angle = inv_freq[i] * (float)position (one fp32 product,
// then cosf/sinf); `inverse` negates the angle. engine::RopeTable::apply; engine::CpuOps::rope.
cudaError_t rope(float* x, int n, int heads, int dim, const float* inv_freq, int pairs, const int64_t* first_position,
                 bool inverse, cudaStream_t stream, int64_t stride = 1);

// rms_norm then rope (not inverse) in one launch, on x [n, heads*dim]: every head row of `dim`
// values is normalised (weight[i] when weight is not null) and rotated at position
// *first_position + t. pairs <= 256. cpu::rms_norm + engine::RopeTable::apply.
cudaError_t rms_norm_rope(float* x, int n, int heads, int dim, const float* weight, float eps, const float* inv_freq,
                          int pairs, const int64_t* first_position, cudaStream_t stream);

// x[i] *= s for i < count.
cudaError_t scale(float* x, int64_t count, float s, cudaStream_t stream);

// streams [n, N*D]: every one of the N streams of token t is the embedding row table[ids[t]] ([vocab, D]).
cudaError_t embed_streams(const int32_t* ids, int n, const float* table, int D, int N, float* streams,
                          cudaStream_t stream);

// ---- hyper-connections (hyper_connection.cu) -------------------------------------------------
// hc_pre and hc_head are one kernel each whose last block finishes the op; the blocks count their
// arrival in static device counters, so these two (and V4.1's hc_map, v41_ops.cuh) must not run
// concurrently with each other (calls on one stream never do).

// mHC site, pre part, for each token t of streams [n, N*D]:
//   r = streams[t] * 1/sqrt(mean(streams[t]^2) + norm_eps)    (over all N*D values, no weight)
//   m = fn · r                                                (fn [(2+N)*N, N*D] fp32)
//   pre[i]  = sigmoid(m[i] * scale[0] + base[i]) + hc_eps                    i < N
//   post[i] = 2 * sigmoid(m[N+i] * scale[1] + base[N+i])                     i < N
//   comb    = m[2N + j*N + k] * scale[2] + base[2N + j*N + k], then Sinkhorn (engine::sinkhorn:
//             row softmax + hc_eps, column normalise, then (iters-1) x (row, column), hc_eps in
//             every denominator)
//   mix[t] = [pre (N) | post (N) | comb (N*N)]                               [n, 2N + N*N]
//   input[t][d] = sum_j pre[j] * streams[t][j*D + d], then RMSNorm with norm_weight, norm_eps.
// engine::hc_mapping + collapse_streams + cpu::rms_norm.
cudaError_t hc_pre(const float* streams, int n, int N, int D, const float* fn, const float* base, const float* scale,
                   int sinkhorn_iters, float hc_eps, float norm_eps, const float* norm_weight, float* mix, float* input,
                   cudaStream_t stream);

// mHC site, post part: streams[t][k*D + d] <- post[k] * sublayer[t][d] + sum_j comb[j*N + k] * streams[t][j*D + d]
// (the old streams on the right). engine::hc_expand.
cudaError_t hc_post(float* streams, int n, int N, int D, const float* mix, const float* sublayer, cudaStream_t stream);

// Final hyper-head for each token t: m = fn · RMS(streams[t]) (fn [N, N*D], norm_eps),
// pre[i] = sigmoid(m[i] * scale[0] + base[i]) + hc_eps, out[t] = sum_j pre[j] * stream_j, then
// RMSNorm with norm_weight (the model's final norm). engine::hyper_head + cpu::rms_norm.
cudaError_t hc_head(const float* streams, int n, int N, int D, const float* fn, const float* base, const float* scale,
                    float hc_eps, float norm_eps, const float* norm_weight, float* out, cudaStream_t stream);

// ---- attention state and attention (attention.cu, compressor.cu) ------------------------------

// K=V rows (window ring rows, compressed attention entries, a chunk's own rows) are stored as
// records of a KvRowLayout (engine::kv_row_layout(format, dim, rope_dims); the RoPE dims are the
// row's LAST rope_dims values, as `rope` above rotates them), little-endian:
//   fp32  dim float32 (4*dim B)
//   bf16  dim bfloat16, round to nearest even (2*dim B: 1024 for 512)
//   fp8   DeepSeek-V4's record (dsv4-model.md section 9, FlashMLA's MODEL1 layout), nope = dim - rope_dims:
//           bytes [0, nope)                    e4m3fn(x_i * 2^-e_b), b = i / 64: round to nearest even,
//                                              saturating to +-448 (__NV_SATFINITE)
//           [nope, nope + 2*rope_dims)         the RoPE dims as bfloat16 (round to nearest even)
//           then ceil(nope / 64) bytes         ue8m0 scale of block b: e_b + 127
//           then zero bytes to a multiple of 8 (512 dims, 64 RoPE: 448 + 128 + 7 + 1 = 584 B)
//         e_b = ceil(log2(max(amax_b, 1e-4) / 448)), the quotient rounded to fp32 (DeepSeek's ue8m0
//         act_quant scale); a short last block when nope % 64 != 0 (the tiny test models).
// Every op writes records with the one encoder (kv_rows.cuh) that engine::encode_kv_row is the
// reference of, bit for bit, and reads them dequantised to fp32; the sums stay fp32. The indexer's
// keys are not K=V rows: they stay fp32.

// records[t] = the record of rows[t] ([n, layout.dim] fp32) for t < n.
cudaError_t kv_encode(const float* rows, int n, const KvRowLayout& layout, uint8_t* records, cudaStream_t stream);

// The sliding window ring [W records]: position p lives in record p % W. Stores the chunk's K=V rows
// (chunk_kv [n, layout.dim] fp32, positions *start ..) that the ring keeps: the last min(n, W) of
// them, encoded as kv_encode does.
cudaError_t window_store(uint8_t* ring, int W, const KvRowLayout& layout, const float* chunk_kv, int n,
                         const int64_t* start, cudaStream_t stream);

// Attention with a sink for each token t (position pos = *start + t) and head h, over keys that are
// also the values (K=V), every key a record of `layout` (hd = layout.dim):
//   - window: positions max(0, pos-W+1) .. pos; a position p < start is read from ring[p % W]
//     (stored by earlier calls), p >= start from chunk_rows[p - start] (the chunk's rows as
//     kv_encode stores them, so a token sees its chunk's rows exactly as later tokens will);
//   - compressed entries (entries, records), when compress_ratio > 0: if `selected` is null (HCA),
//     every entry e < (pos + 1) / compress_ratio; else the entries selected[t*k_sel + j] that are
//     >= 0 (CSA: the indexer's choice).
//   logits l_j = (q[t][h] · key_j) * scale; mx = max(sink[h], max_j l_j);
//   out[t][h] = sum_j exp(l_j - mx) / (exp(sink[h] - mx) + sum_i exp(l_i - mx)) * key_j
// Then out's last 2*pairs dims of every head are rotated back by rope's inverse at pos, with
// inv_freq[pairs] (the keys carried RoPE into the values; pairs >= 0, (hd - 2*pairs) % 4 == 0).
// q and out are [n, H*hd]. engine::attend_with_sink over the decoded keys (the key order does not
// matter), then engine::RopeTable::apply inverse. `scratch` holds attend_scratch_floats(n, H, hd)
// floats, 16-byte aligned (may be null when that is 0): a token's keys may be split over several
// blocks whose partial softmax states meet there.
// With `store` (its ring the ring read above), the ring then takes the chunk's rows as window_store
// stores them (the same bytes), by the kernel that merges those states: no launch of its own.
struct RingStore {
  uint8_t* ring = nullptr;      // null: nothing stored
  const float* rows = nullptr;  // the chunk's K=V rows [n, layout.dim] fp32
};
cudaError_t attend(const float* q, int n, int H, const KvRowLayout& layout, const uint8_t* ring, int W,
                   const uint8_t* chunk_rows, const int64_t* start, const uint8_t* entries, int compress_ratio,
                   const int32_t* selected, int k_sel, const float* sinks, float scale, const float* inv_freq,
                   int pairs, float* out, float* scratch, cudaStream_t stream, RingStore store = {});
int64_t attend_scratch_floats(int n, int H, int hd);

// A compressor's state on the device mirrors engine::CompressorState; what the host keeps there
// as counters follows from the position alone (pending = position % ratio, has_overlap =
// position >= ratio, n_entries = position / ratio).
struct CompressorBuffers {
  float* pending_kv;    // [ratio, width]: raw projections of the open window's tokens (row = position % ratio)
  float* pending_gate;  // [ratio, width]
  float* overlap_kv;    // [ratio, dim], overlapping only: Ca half of the last closed window
  float* overlap_gate;  // [ratio, dim], overlapping only: its gates plus position_bias
  uint8_t* entries;     // [capacity] records of the entry layout: entry w at record w
};

// Pushes a chunk of n tokens (positions *start ..) through a compressor: kv, gate are the tokens'
// raw projections [n, width] with width = (overlapping ? 2 : 1) * dim. For every window the chunk
// closes (position p with (p+1) % ratio == 0, entry w = p / ratio) it writes entries[w]:
//   slots: [Ca of window w-1 (overlapping only; empty for w = 0: kv 0, gate -inf) | own tokens];
//   own token j (position w*ratio + j): kv and gate from the Cb half (overlapping) or the whole
//   projection (offset 0 otherwise) of pending (position < start) or the chunk, gate + position_bias[j];
//   Ca token j of window w-1: overlap (position < start; already biased) or the chunk's Ca half + bias[j];
//   per channel c: softmax of the slot gates, sum of kv times those weights; then RMSNorm over dim with
//   norm_weight and eps; then RoPE (inv_freq, pairs) at position w * ratio; stored as a record of
//   `entry` (dim values, 2*pairs RoPE dims), encoded as kv_encode does.
// Then it leaves pending holding the chunk's tokens of the still-open window and, if a window closed,
// overlap holding that last closed window's Ca half (kv, and gate + bias). engine::Compressor::push.
cudaError_t compress_chunk(const CompressorBuffers& b, const float* kv, const float* gate, int n,
                           const int64_t* start, int ratio, int dim, bool overlapping, const float* position_bias,
                           const float* norm_weight, float eps, const float* inv_freq, int pairs,
                           const KvRowLayout& entry, cudaStream_t stream);

// Indexer scores for each token t (position *start + t) over the entries visible to it
// (e < (*start + t + 1) / ratio; ratio 0: every column, as V4.1's index_scores scores them all and
// leaves visibility to the selection), as engine::indexer_scores:
//   s = sum_h max(q[t][h] · keys[e], 0) * (1/sqrt(d)) * w[t][h];  other columns -inf.
// q [n, H*d], w [n, H] (already scaled by 1/sqrt(H)), keys [cols, d] fp32 (the indexer
// compressor's entries, stored as fp32 records; rows past the visible ones may hold anything),
// scores [n, cols]. `cols` may exceed what any token sees (a graph's bound).
cudaError_t indexer_scores(const float* q, const float* w, int n, int H, int d, const float* keys,
                           const int64_t* start, int ratio, int cols, float* scores, cudaStream_t stream);

// ---- MoE (moe.cu) ---------------------------------------------------------------------------

// Routing for each token t from the router logits [n, E] (engine::route):
//   score[e] = sqrt(softplus(logit[e] / gate_temp)) (torch softplus: x > 20 gives x, else
//   log1p(exp(x)); gate_temp 1 for V4, DeepSeek-V4.1's router temperature for V4.1);
//   experts: forced[t*k ..] when forced is not null (routing replay, engine/routing_replay.h),
//   else tid2eid[ids[t]*k ..] when tid2eid is not null (hash layers), else the top k of
//   score + bias (higher first; ties by lower expert);
//   weights[t*k + j] = score[expert_j] / (sum of the k scores + 1e-20) * scaling.
cudaError_t route(const float* logits, int n, int E, int k, const float* bias, const int32_t* tid2eid,
                  const int32_t* ids, float scaling, int32_t* experts, float* weights, cudaStream_t stream,
                  const int32_t* forced = nullptr, float gate_temp = 1.0f);

// The weights of every expert, as device tables of device pointers indexed by expert id; the shared
// expert is index E (one past the routed experts). gate, up: [I, D]; down: [D, I]; every routed
// expert's matrices of `type`, the shared expert's of `shared_type` (DeepSeek-V4-Flash ships its
// routed experts FP4 and its shared expert FP8), laid out as weight_format.h says. FP8 / FP4
// matrices must start 16-byte aligned (cudaMalloc'd buffers do; unchecked: the tables live on the
// device), and D and I be multiples of 16 (FP8) / 32 (FP4), else moe_experts refuses them; each
// weight is decoded exactly where it is used, so the result is that over cpu::dequantize's weights.
// EXL3 routed experts (type Exl3; the shared expert is never EXL3): each entry points at an
// Exl3DeviceMatrix (exl3_gemv.h) in device memory, of the role's shape, whose bit width is
// exl3_bits[role] (gate, up, down) for every routed expert (the kernels take it as a template
// parameter; the host never reads the tables); the codebook may differ between experts; D and I at
// most 8192 (exl3_moe.cuh).
struct ExpertTables {
  const void* const* gate;
  const void* const* up;
  const void* const* down;
  WeightType type;         // the routed experts' (indices < E)
  WeightType shared_type;  // the shared expert's (index E)
  int exl3_bits[3] = {};   // type Exl3: the routed experts' bits of gate, up, down (1..8)
};

// Floats of `hidden` moe_experts needs: n * (k+1) * I, or for EXL3 routed experts n*k * (2*I + D)
// (each slot's gate and up outputs, then its down output, summed per token in a last kernel).
int64_t moe_hidden_floats(int n, int k, int D, int I, const ExpertTables& tables);

// out[t] = sum_j weights[t*k + j] * expert(experts[t*k + j], x[t]) + expert(E, x[t]) with
// expert(e, x) = down_e · (silu(min(gate_e·x, limit)) * clamp(up_e·x, -limit, limit)).
// `hidden` is scratch of moe_hidden_floats floats. engine::moe_forward. With one type the routed
// and shared experts run in one pass of two kernels; with two, a pass of the routed experts stores
// their sum and a second pass of the same kernels adds the shared expert's output (the reference's
// order: the routed sum, then the shared expert). EXL3 routed experts take their own pass
// (exl3_moe.cuh), then the shared expert's is added the same way. Either way every value of out is
// summed by one thread in a fixed order: every run gives the same bits.
cudaError_t moe_experts(const float* x, int n, int D, int I, const int32_t* experts, const float* weights, int k, int E,
                        const ExpertTables& tables, float limit, float* hidden, float* out, cudaStream_t stream);

// moe_experts in two calls, the shared expert's pass apart, so that it can run before the routing
// is known (beside the router and route, on another stream: CudaOps::moe_forward). First
// moe_shared_expert stores the shared expert's output (table index E) in out; then
// moe_routed_experts adds the routed experts' sum to it: out = shared + routed sum, one addition
// per value, the bits of moe_experts with two types (a + b = b + a exactly). Not for EXL3 routed
// experts. `hidden`: moe_hidden_floats(n, 0, ..) floats for the first, (n, k, ..) for the second
// (two buffers when they run at once). `blocks_share`: the shared pass takes 1/blocks_share of the
// blocks that fit on the GPU (2 beside other kernels, so that theirs fit too). `before_down`: an
// event the routed pass's down kernel waits for (the shared pass's end on its stream; null: none).
cudaError_t moe_shared_expert(const float* x, int n, int D, int I, int E, const ExpertTables& tables, float limit,
                              int blocks_share, float* hidden, float* out, cudaStream_t stream);
cudaError_t moe_routed_experts(const float* x, int n, int D, int I, const int32_t* experts, const float* weights, int k,
                               int E, const ExpertTables& tables, float limit, cudaEvent_t before_down, float* hidden,
                               float* out, cudaStream_t stream);

// ---- sampling (sampling.cu) ------------------------------------------------------------------

// out[r] = the greedy token of row r of logits [rows, vocab]: the lowest index of the largest
// value, NaN values never chosen, and 0 when the row's first value is NaN — what a left-to-right
// scan keeping the first strict maximum returns (engine::argmax). Temperature / top-p sampling
// stays on the host: its nucleus is summed in double in sorted order (engine::Sampler).
cudaError_t argmax_rows(const float* logits, int rows, int64_t vocab, int32_t* out, cudaStream_t stream);

}  // namespace frank::cuda
