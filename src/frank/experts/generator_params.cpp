#include "frank/experts/generator_params.h"

#include <fmt/format.h>

#include "frank/core/error.h"

namespace frank::experts {
namespace {

void require(bool ok, const char* name, double value, const char* range) {
  if (!ok) throw Error(fmt::format("trace generator: {} = {} is not {}", name, value, range));
}

}  // namespace

void validate(const GeneratorParams& p) {
  require(p.n_layers >= 1, "layers", p.n_layers, ">= 1");
  require(p.n_experts >= 1 && p.n_experts <= 65536, "experts", p.n_experts, "in 1..65536");
  require(p.top_k >= 1 && p.top_k < p.n_experts, "top_k", p.top_k, "in 1..experts-1");
  require(p.hot_fraction > 0 && p.hot_fraction < 1, "hot_fraction", p.hot_fraction, "in (0, 1)");
  require(p.hot_share > 0 && p.hot_share < 1, "hot_share", p.hot_share, "in (0, 1)");
  require(p.depth_gradient >= 1, "depth_gradient", p.depth_gradient, ">= 1");
  require(p.head_offset >= 0, "head_offset", p.head_offset, ">= 0");
  require(p.overlap >= 0 && p.overlap <= 1, "overlap", p.overlap, "in [0, 1]");
  require(p.phases >= 1, "phases", p.phases, ">= 1");
  require(p.phase_shift >= 0 && p.phase_shift <= 1, "phase_shift", p.phase_shift, "in [0, 1]");
  require(p.phase_mean_tokens >= 1, "phase_mean_tokens", p.phase_mean_tokens, ">= 1");
  require(p.prefill_shift >= 0 && p.prefill_shift <= 1, "prefill_shift", p.prefill_shift, "in [0, 1]");
  require(p.persistence >= 0 && p.persistence < 1, "persistence", p.persistence, "in [0, 1)");
  require(p.prefill_chunk_tokens >= 1, "prefill_chunk_tokens", p.prefill_chunk_tokens, ">= 1");
  require(p.decode_mean_tokens >= 1, "decode_mean_tokens", p.decode_mean_tokens, ">= 1");
  require(p.verify_fraction >= 0 && p.verify_fraction <= 1, "verify_fraction", p.verify_fraction, "in [0, 1]");
}

}  // namespace frank::experts
