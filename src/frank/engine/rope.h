#pragma once
// Rotary position embedding as DeepSeek-V4 uses it: on the trailing `rope_dim` dims of a vector,
// in interleaved pairs (x[2i], x[2i+1]) rotated by angle inv_freq[i] * position.
#include <cstdint>
#include <vector>

#include "frank/model/config.h"

namespace frank::engine {

class RopeTable {
 public:
  RopeTable(const model::RopeSpec& spec, int rope_dim);

  // One inverse frequency per pair, built in fp32 the way transformers builds it (plain:
  // 1 / theta^(2i/d); YaRN: a ramp between interpolated and extrapolated frequencies over the
  // correction range, attention factor 1).
  const std::vector<float>& inv_freq() const { return inv_freq_; }

  // Rotates the last rope_dim values of x[0, dim) at `position`; `inverse` rotates by the negated
  // angle (the attention output is un-rotated at the query position).
  void apply(float* x, int dim, int64_t position, bool inverse = false) const;

 private:
  std::vector<float> inv_freq_;
};

}  // namespace frank::engine
