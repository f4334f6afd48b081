#include "frank/engine/compressor.h"

#include <cmath>
#include <limits>

#include "frank/cpu/ops.h"

namespace frank::engine {

Compressor::Compressor(const model::CompressorWeights& w, int ratio, int dim, bool overlapping, float eps,
                       const RopeTable& rope)
    : w_(w), ratio_(ratio), dim_(dim), halves_(overlapping ? 2 : 1), eps_(eps), rope_(rope) {}

bool Compressor::push(CompressorState& s, const float* kv, const float* gate) const {
  const int width = projection_width();
  s.pending_kv.insert(s.pending_kv.end(), kv, kv + width);
  s.pending_gate.insert(s.pending_gate.end(), gate, gate + width);
  if (++s.pending < ratio_) return false;
  emit(s);
  return true;
}

void Compressor::emit(CompressorState& s) const {
  const int width = projection_width();
  const float* bias = w_.position_bias.data.data();  // [ratio, width]
  const int own_offset = halves_ == 2 ? dim_ : 0;   // CSA pools this window's Cb half
  const int n_slots = halves_ * ratio_;
  const float neg_inf = -std::numeric_limits<float>::infinity();

  // Slot layout per channel: [previous window's Ca (CSA only) | this window's tokens].
  std::vector<float> slot_kv(static_cast<size_t>(n_slots) * dim_, 0.0f);
  std::vector<float> slot_gate(static_cast<size_t>(n_slots) * dim_, neg_inf);
  const int own_first = halves_ == 2 ? ratio_ : 0;
  if (halves_ == 2 && s.has_overlap) {
    std::copy(s.overlap_kv.begin(), s.overlap_kv.end(), slot_kv.begin());
    std::copy(s.overlap_gate.begin(), s.overlap_gate.end(), slot_gate.begin());
  }
  for (int j = 0; j < ratio_; ++j)
    for (int c = 0; c < dim_; ++c) {
      const size_t src = static_cast<size_t>(j) * width + own_offset + c;
      const size_t dst = static_cast<size_t>(own_first + j) * dim_ + c;
      slot_kv[dst] = s.pending_kv[src];
      slot_gate[dst] = s.pending_gate[src] + bias[src];
    }

  // Per channel: softmax of the gates over the slots, weighted sum of kv.
  std::vector<float> entry(dim_);
  std::vector<float> g(n_slots);
  for (int c = 0; c < dim_; ++c) {
    for (int k = 0; k < n_slots; ++k) g[k] = slot_gate[static_cast<size_t>(k) * dim_ + c];
    cpu::softmax(g.data(), n_slots);
    double sum = 0.0;
    for (int k = 0; k < n_slots; ++k) sum += static_cast<double>(slot_kv[static_cast<size_t>(k) * dim_ + c]) * g[k];
    entry[c] = static_cast<float>(sum);
  }
  cpu::rms_norm(entry.data(), dim_, w_.norm.data.data(), eps_);
  rope_.apply(entry.data(), dim_, s.n_entries * ratio_);
  s.entries.insert(s.entries.end(), entry.begin(), entry.end());
  ++s.n_entries;

  if (halves_ == 2) {
    // The Ca half of this window (gate with its position bias) feeds the next window's entry.
    s.overlap_kv.assign(static_cast<size_t>(ratio_) * dim_, 0.0f);
    s.overlap_gate.assign(static_cast<size_t>(ratio_) * dim_, 0.0f);
    for (int j = 0; j < ratio_; ++j)
      for (int c = 0; c < dim_; ++c) {
        const size_t src = static_cast<size_t>(j) * width + c;
        s.overlap_kv[static_cast<size_t>(j) * dim_ + c] = s.pending_kv[src];
        s.overlap_gate[static_cast<size_t>(j) * dim_ + c] = s.pending_gate[src] + bias[src];
      }
    s.has_overlap = true;
  }
  s.pending_kv.clear();
  s.pending_gate.clear();
  s.pending = 0;
}

}  // namespace frank::engine
