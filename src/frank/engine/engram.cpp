#include "frank/engine/engram.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "frank/core/error.h"
#include "frank/cpu/ops.h"

namespace frank::engine {

namespace {

// [history | the classes of ids]: look-back s of the call's token t is classes[context + t - s].
std::vector<int32_t> lookback_classes(const model::EngramLayout& layout, std::span<const int32_t> ids,
                                      const EngramHistory& history) {
  std::vector<int32_t> classes = history.classes;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= layout.token_map.size())
      throw Error(fmt::format("Engram: token id {} is outside the token map ({} ids)", id, layout.token_map.size()));
    classes.push_back(layout.token_map[id]);
  }
  return classes;
}

// The history after the tokens of `classes` (lookback_classes): their last `context` classes.
void keep_lookback(const std::vector<int32_t>& classes, int context, EngramHistory& history) {
  history.classes.assign(classes.end() - context, classes.end());
}

}  // namespace

EngramHistory engram_fresh_history(const model::EngramLayout& layout) {
  return {std::vector<int32_t>(layout.max_ngram_size - 1, kEngramDead)};
}

void engram_advance(const model::EngramLayout& layout, std::span<const int32_t> ids, EngramHistory& history) {
  keep_lookback(lookback_classes(layout, ids, history), layout.max_ngram_size - 1, history);
}

std::vector<int64_t> engram_hash_ids(const model::EngramLayout& layout, std::span<const int32_t> ids,
                                     EngramHistory& history) {
  const int n = layout.max_ngram_size, context = n - 1, heads = layout.n_heads;
  const size_t layers = layout.modulus.size();
  const std::vector<int32_t> classes = lookback_classes(layout, ids, history);

  std::vector<int64_t> out;
  out.reserve(ids.size() * layers * layout.columns);
  std::vector<int64_t> lookback(n);
  for (size_t t = 0; t < ids.size(); ++t) {
    bool blocked = false;  // once a DEAD slot is met, it and every longer look-back hash the pad class
    for (int s = 0; s < n; ++s) {
      const int32_t c = classes[context + t - s];
      blocked = blocked || c == kEngramDead;
      lookback[s] = blocked ? layout.pad_class : c;
    }
    for (size_t k = 0; k < layers; ++k) {
      const auto& m = layout.multiplier[k];
      int64_t rolling = lookback[0] * m[0];
      for (int s = 1; s < n; ++s) {
        rolling ^= lookback[s] * m[s];  // the hash of the (s+1)-gram, non-negative
        for (int h = 0; h < heads; ++h) {
          const int col = (s - 1) * heads + h;
          out.push_back(rolling % layout.modulus[k][col] + layout.offset[k][col]);
        }
      }
    }
  }
  keep_lookback(classes, context, history);
  return out;
}

std::vector<float> engram_gather(const Tensor& table, std::span<const int64_t> row_ids) {
  const int64_t rows = table.rows(), width = table.cols();
  std::vector<float> out;
  out.reserve(row_ids.size() * width);
  for (int64_t r : row_ids) {
    if (r < 0 || r >= rows) throw Error(fmt::format("Engram: row id {} is outside the table ({} rows)", r, rows));
    out.insert(out.end(), table.data.begin() + r * width, table.data.begin() + (r + 1) * width);
  }
  return out;
}

void engram_mix(const model::V41EngramWeights& w, std::span<const float> gathered, int hc_mult, int hidden, float eps,
                float* streams) {
  const int D = hidden;
  std::vector<float> kv(static_cast<size_t>(hc_mult + 1) * D);
  cpu::linear(gathered.data(), 1, w.wkv, kv.data());
  const float* value = kv.data() + static_cast<size_t>(hc_mult) * D;
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(D));
  for (int k = 0; k < hc_mult; ++k) {
    float* x = streams + static_cast<size_t>(k) * D;
    const float* key = kv.data() + static_cast<size_t>(k) * D;
    const float* q_w = w.q_weight.data.data() + static_cast<size_t>(k) * D;
    const float* k_w = w.k_weight.data.data() + static_cast<size_t>(k) * D;
    double dot = 0.0, x_sq = 0.0, key_sq = 0.0;
    for (int d = 0; d < D; ++d) {
      const float weight = q_w[d] * k_w[d];  // transformers forms the product in fp32 first
      dot += static_cast<double>(x[d]) * weight * key[d];
      x_sq += static_cast<double>(x[d]) * x[d];
      key_sq += static_cast<double>(key[d]) * key[d];
    }
    const float rstd = static_cast<float>(1.0 / std::sqrt(x_sq / D + eps)) *
                       static_cast<float>(1.0 / std::sqrt(key_sq / D + eps));
    const float d_k = static_cast<float>(static_cast<float>(dot) * rstd * inv_sqrt_d);
    // Signed square root: copysign keeps the sign of a zero dot (reference notes W7).
    const float gate = cpu::sigmoid(std::copysign(std::sqrt(std::max(std::fabs(d_k), 1e-6f)), d_k));
    for (int d = 0; d < D; ++d) x[d] += gate * value[d];
  }
}

}  // namespace frank::engine
