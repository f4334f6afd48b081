#pragma once
// The CUDA backend of the DeepSeek-V4.1 forward pass (engine/v41_decoder_layer.h,
// v41_attention_forward.h): CudaOps' ops, plus the ops and types V4.1 adds (docs/architecture.md
// lists their contracts), each one or a few launches of frank/cuda/ops.cuh and v41_ops.cuh on one
// stream, on a device-resident session. engine::CpuOps is the reference of every op.
//
// V4.1 steps are issued eagerly (no CUDA graph yet): a call's host-side sizes (the groups it
// closes, the entries published so far) are known when its ops are issued.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "frank/cuda/branch_stream.h"
#include "frank/cuda/cuda_ops.h"
#include "frank/engine/engram.h"
#include "frank/engine/fake_quant.h"
#include "frank/engine/rope.h"
#include "frank/model/config_v41.h"
#include "frank/model/engram_layout.h"
#include "frank/model/weights_v41.h"

namespace frank::cuda {

// The raw projections (kv, gate) a gated (ratio-2) KV source took in during the last forward call,
// rows [0, tokens) from position `start` (engine::V41CallRecord): a rewind of that call rebuilds
// the open group of any prefix from them (device_v41_checkpoint.h). Kept only for a call the ops
// were told to record (CudaV41Ops::set_call_record_limit); otherwise tokens is 0. The buffers keep
// their capacity from call to call.
struct DeviceV41CallRecord {
  DeviceArray<float> kv, gate;  // [capacity >= tokens, head_dim]
  int64_t start = 0, tokens = 0;
};

// What a KV source (a layer with a compressor) keeps between calls, in device memory
// (engine::V41SourceState): the open group's raw rows, and one row per closed group of entries and,
// for a key owner, indexer keys. Rows grow by doubling, stream-ordered.
struct DeviceV41Source {
  int ratio = 0;
  DeviceArray<float> pending_kv, pending_gate;  // [ratio, head_dim]: row = position % ratio (ratio 2)
  DeviceArray<float> entries;                   // [capacity, head_dim]: post-RoPE, FP4-rounded
  DeviceArray<float> index_keys;                // [capacity, index_head_dim] (key owners)
  int64_t n_entries = 0;
  DeviceV41CallRecord last_call;  // ratio 2 only
};

// engine::V41Session in device memory: every layer's window ring of fp32 K=V rows (already
// FP8-rounded by the forward), the KV sources, and the Engram hash's look-back (host: the hash is
// integer work on the ids).
struct DeviceV41Session {
  int64_t position = 0;
  DeviceArray<int64_t> position_at;            // [1]: `position` where the kernels read it
  std::vector<DeviceArray<float>> windows;     // [sliding_window, head_dim]: position p in row p % window
  std::vector<std::optional<DeviceV41Source>> sources;
  engine::EngramHistory engram;
};

// A call's Engram row ids: on the host as engine::engram_hash_ids returns them ([n, layers,
// columns], checked against each table there), and on the device one Engram layer after another
// ([layers][n, columns]) so that each layer gathers a contiguous run.
struct DeviceEngramRows {
  std::vector<int64_t> host;
  DeviceArray<int64_t> device;
};

// Level 1 of the two-level top-k: each token's chosen blocks (v41_ops.cuh, candidate_blocks) over
// the candidate source's `block_cols` entries.
struct DeviceCandidates {
  DeviceArray<int32_t> blocks;  // [n, topk_blocks], ascending, -1 padded
  int block_size = 0;
  int block_cols = 0;
};

// The mHC overlap (issue 6): single-pass mHC's mapping of a site depends only on the streams as
// they enter it, and is first needed by that site's hc_post, so hc_map may run on a branch stream
// (branch_stream.h, the model's: CudaV41Model::set_mhc_overlap) while the collapse and the
// sublayer (attention, MoE) run on the main one.

// DSpark's context rings in device memory (engine::DSparkState): per stage, the fp32 K=V rows
// (FP8-rounded by the forward) of the last sliding_window observed positions, position p in row
// p % window. Copyable (deep, stream-ordered), so a drafter can keep one for a rollback.
struct DeviceDSparkState {
  int64_t position = 0;  // context rows written = the position of the next target token
  std::vector<DeviceArray<float>> rings;  // per stage: [sliding_window, head_dim]
};

class CudaV41Ops : public CudaOps {
 public:
  using CudaOps::CudaOps;
  using V41Session = DeviceV41Session;
  using V41Source = DeviceV41Source;
  using EngramRows = DeviceEngramRows;
  using Candidates = DeviceCandidates;
  using DSparkState = DeviceDSparkState;

  // Reindexing layers select inside the candidate blocks with the fused kernel
  // (select_entries_in_blocks) unless this is off: then a mask, then the plain selection (the two
  // are byte-identical; the switch is for comparing them).
  void set_fused_candidates(bool on) { fused_candidates_ = on; }
  // hc_map runs on `side` (null: on the main stream, the default); ops that read a mix wait for it.
  void set_mhc_overlap(const BranchStream* side) { side_ = side; }
  // pool_groups records a call of at most `tokens` tokens in its source's last_call (two
  // device-to-device copies); a longer one (or any, at 0, the default) clears the record.
  void set_call_record_limit(int64_t tokens) { record_limit_ = tokens; }

  Mix hc_map(const model::HyperConnectionWeights& hc, const Array& streams, const model::CommonConfig& c) const;
  void hc_post(const Mix& mix, const Array& sublayer, Array& streams, const model::CommonConfig& c) const;
  Array hc_collapse(const Array& streams, const Mix* mix, const Tensor& norm, int64_t first,
                    const model::CommonConfig& c) const;
  void fake_quant(Array& x, int width, engine::FakeQuant grid, int block) const;
  Array moe_v41(const model::V41Config& c, const model::MoeWeights& w, const Array& x, const Ids& ids) const;

  EngramRows engram_rows(const model::EngramLayout& layout, const Ids& ids, engine::EngramHistory& history) const;
  void engram_add(Array& streams, const model::V41EngramWeights& w, const EngramRows& rows,
                  const model::EngramLayout& layout, int slot, const model::CommonConfig& c) const;

  Array pool_groups(V41Source& source, const Array& kv, const Array* gate, int ratio, int64_t start) const;
  void publish(V41Source& source, const Array& entries, const Array* index_keys) const;
  Array index_scores(const Array& q, const Array& w, const V41Source& keys) const;
  Candidates candidate_blocks(const Array& scores, int64_t start, int ratio, int topk_blocks, int block_size) const;
  Selection select_entries(const Array& scores, int64_t start, int ratio, const Candidates* within, int topk) const;
  Array attend_v41(const Array& q, const Array& kv, const Array& ring, int64_t start, int window, const Tensor& sinks,
                   const engine::RopeTable& rope, const V41Source* entries, const Selection* selected) const;
  void window_store(Array& ring, const Array& kv, int64_t start, int window) const;

  // DSpark (engine/dspark_forward.h): hc_collapse without the norm; the block attention (keys: the
  // ring's W positions before `start` and all block rows); the Markov chain's small array ops.
  Array hc_sum(const Array& streams, const Mix* mix, int64_t first, const model::CommonConfig& c) const;
  Array attend_block(const Array& q, const Array& kv, const Array& ring, int64_t start, int window,
                     const Tensor& sinks, const engine::RopeTable& rope) const;
  Array rows(const Array& x, int64_t first, int64_t n) const;
  Array stack_rows(std::span<const Array> parts) const;
  Array concat_cols(const Array& a, const Array& b) const;
  // Per row, the first maximum (argmax_rows, ops.cuh); device ids only (no host copy).
  Ids argmax_rows(const Array& logits) const;

 private:
  // With the overlap on: the main stream waits for the hc_map issued on the side stream, if it is
  // still pending and wrote `mix` (null: whichever it wrote).
  void wait_for_mix(const float* mix = nullptr) const;
  // pool_groups' record of the chunk's raw rows (set_call_record_limit).
  void record_call(DeviceV41CallRecord& record, const Array& kv, const Array& gate, int64_t start) const;

  bool fused_candidates_ = true;
  const BranchStream* side_ = nullptr;
  int64_t record_limit_ = 0;
  mutable const float* pending_mix_ = nullptr;  // the mix of the hc_map the main stream has not waited for
};

}  // namespace frank::cuda
