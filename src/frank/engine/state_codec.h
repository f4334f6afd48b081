#pragma once
// Binary encoding of sessions and checkpoints for the on-disk prefix cache: little-endian,
// length-prefixed arrays, in field order. Decoding checks every length against what is left, so a
// damaged file is an error, never an out-of-bounds read.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "frank/engine/session_checkpoint.h"

namespace frank::engine {

class Encoder {
 public:
  void u64(uint64_t v);
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void floats(const std::vector<float>& v);
  void ints(const std::vector<int32_t>& v);
  void session(const Session& s);
  void checkpoint(const SessionCheckpoint& c);
  const std::string& bytes() const { return out_; }

 private:
  // The fields a CompressorState and its checkpoint share, in file order.
  template <typename Compressor>
  void open_window(const Compressor& c) {
    floats(c.pending_kv), floats(c.pending_gate), i64(c.pending);
    floats(c.overlap_kv), floats(c.overlap_gate), u64(c.has_overlap);
  }
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
};

class Decoder {
 public:
  explicit Decoder(std::string_view in) : in_(in) {}
  uint64_t u64();
  int64_t i64() { return static_cast<int64_t>(u64()); }
  std::vector<float> floats();
  std::vector<int32_t> ints();
  Session session();
  SessionCheckpoint checkpoint();
  bool done() const { return pos_ == in_.size(); }

 private:
  template <typename Compressor>
  void open_window(Compressor& c) {
    c.pending_kv = floats(), c.pending_gate = floats(), c.pending = static_cast<int>(i64());
    c.overlap_kv = floats(), c.overlap_gate = floats(), c.has_overlap = u64() != 0;
  }
  void raw(void* p, size_t n);
  size_t count(size_t element_size);
  std::string_view in_;
  size_t pos_ = 0;
};

}  // namespace frank::engine
