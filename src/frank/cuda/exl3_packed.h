#pragma once
// An EXL3 matrix as the GPU keeps it (plain C++: DeviceWeights and the GPU cache slots build it on
// the host): one buffer of fp16 words, the trellis (whole 16 x 16 tiles, so suh stays 4-byte
// aligned, as exl3_linear wants) then suh [padded cols] then svh [padded rows]; and the
// Exl3DeviceMatrix that points into it.
#include <cstdint>
#include <cstring>

#include "frank/core/linear_weight.h"
#include "frank/core/packed_bytes.h"
#include "frank/cpu/quant/exl3_matrix.h"
#include "frank/cuda/exl3_gemv.h"

namespace frank::cuda {

// The words of m's trellis, and the bytes of q's whole buffer (the packed bytes plans count).
inline int64_t exl3_trellis_words(const Exl3DeviceMatrix& m) { return m.padded_cols() * m.padded_rows() * m.bits / 16; }
inline int64_t exl3_buffer_bytes(const QuantizedMatrix& q) { return exl3_bytes(q.rows, q.cols, q.bits); }

// The matrix of `q`'s shape, bits and codebook whose buffer starts at `buffer` (device memory).
inline Exl3DeviceMatrix exl3_device_matrix(const QuantizedMatrix& q, const uint16_t* buffer) {
  Exl3DeviceMatrix m{nullptr, nullptr, nullptr, q.rows, q.cols, q.bits, q.codebook};
  const int64_t words = exl3_trellis_words(m);
  m.trellis = buffer, m.suh = buffer + words, m.svh = buffer + words + m.padded_cols();
  return m;
}

// Writes q's buffer (exl3_buffer_bytes(q) bytes) to `out`. frank::Error when q's trellis or sign
// vectors do not fit its shape (cpu::exl3_view), e.g. a shape-only weight.
inline void write_exl3_buffer(const QuantizedMatrix& q, uint8_t* out) {
  cpu::exl3_view(q);
  std::memcpy(out, q.trellis.data(), q.trellis.size() * 2);
  out += q.trellis.size() * 2;
  std::memcpy(out, q.suh.data(), q.suh.size() * 2);
  std::memcpy(out + q.suh.size() * 2, q.svh.data(), q.svh.size() * 2);
}

}  // namespace frank::cuda
