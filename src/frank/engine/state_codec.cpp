#include "frank/engine/state_codec.h"

#include <bit>
#include <cstring>

#include "frank/core/error.h"

namespace frank::engine {

static_assert(std::endian::native == std::endian::little, "the codec writes native little-endian values");

void Encoder::u64(uint64_t v) { raw(&v, sizeof v); }

void Encoder::floats(const std::vector<float>& v) {
  u64(v.size());
  raw(v.data(), v.size() * sizeof(float));
}

void Encoder::ints(const std::vector<int32_t>& v) {
  u64(v.size());
  raw(v.data(), v.size() * sizeof(int32_t));
}

void Encoder::session(const Session& s) {
  i64(s.position);
  u64(s.layers.size());
  for (const auto& l : s.layers) {
    floats(l.window);
    for (const CompressorState* c : {&l.compressor, &l.indexer}) {
      open_window(*c);
      floats(c->entries), i64(c->n_entries);
    }
  }
}

void Encoder::checkpoint(const SessionCheckpoint& cp) {
  i64(cp.position);
  u64(cp.layers.size());
  for (const auto& l : cp.layers) {
    floats(l.window);
    for (const CompressorCheckpoint* c : {&l.compressor, &l.indexer}) {
      open_window(*c);
      i64(c->n_entries);
    }
  }
}

void Decoder::raw(void* p, size_t n) {
  if (n > in_.size() - pos_) throw Error("prefix cache entry is truncated");
  std::memcpy(p, in_.data() + pos_, n);
  pos_ += n;
}

size_t Decoder::count(size_t element_size) {
  const uint64_t n = u64();
  if (n > (in_.size() - pos_) / element_size) throw Error("prefix cache entry has an impossible array length");
  return static_cast<size_t>(n);
}

uint64_t Decoder::u64() {
  uint64_t v;
  raw(&v, sizeof v);
  return v;
}

std::vector<float> Decoder::floats() {
  std::vector<float> v(count(sizeof(float)));
  raw(v.data(), v.size() * sizeof(float));
  return v;
}

std::vector<int32_t> Decoder::ints() {
  std::vector<int32_t> v(count(sizeof(int32_t)));
  raw(v.data(), v.size() * sizeof(int32_t));
  return v;
}

Session Decoder::session() {
  Session s;
  s.position = i64();
  s.layers.resize(count(1));
  for (auto& l : s.layers) {
    l.window = floats();
    for (CompressorState* c : {&l.compressor, &l.indexer}) {
      open_window(*c);
      c->entries = floats(), c->n_entries = i64();
    }
  }
  return s;
}

SessionCheckpoint Decoder::checkpoint() {
  SessionCheckpoint cp;
  cp.position = i64();
  cp.layers.resize(count(1));
  for (auto& l : cp.layers) {
    l.window = floats();
    for (CompressorCheckpoint* c : {&l.compressor, &l.indexer}) {
      open_window(*c);
      c->n_entries = i64();
    }
  }
  return cp;
}

}  // namespace frank::engine
