#pragma once
// EXL3 (ExLlamaV3) weights on the GPU: decoding the trellis and y = W x for 1-8 tokens, each
// tile decoded where it is used (no dequantised copy of W). The math and the layout are the CPU
// reference's (cpu/quant/exl3_gemv.h): decoding and the input transform u = H(suh ∘ x) are equal
// to it bit for bit; Q^T u is summed in another order (k split over the whole GPU, fma, then the
// slices in order: exl3_gemv.cu), so y differs from cpu::linear_rows by fp32 rounding only, within
// the bound tests/cuda/test_cuda_exl3.cpp derives. The order is fixed for a shape (no atomics, and
// not taken from the device), so every run gives the same bits.
// Every pointer is device memory; launchers are asynchronous on `stream` and return the launch
// error, or cudaErrorInvalidValue for arguments they cannot serve.
#include <cstdint>

#include <cuda_runtime.h>

#include "frank/core/linear_weight.h"

namespace frank::cuda {

struct Exl3DeviceMatrix {
  const uint16_t* trellis = nullptr;  // [padded_cols/16, padded_rows/16, 16 * bits]
  const uint16_t* suh = nullptr;      // fp16 [padded_cols]
  const uint16_t* svh = nullptr;      // fp16 [padded_rows]
  int64_t rows = 0, cols = 0;         // the Linear's out and in features (padded: next multiples of 128)
  int bits = 0;                       // 1..8
  Exl3Codebook codebook = Exl3Codebook::ThreeInst;

  int64_t padded_rows() const { return (rows + 127) / 128 * 128; }
  int64_t padded_cols() const { return (cols + 127) / 128 * 128; }
};

// q [padded_cols, padded_rows] = the decoded trellis as fp16 bits (cpu::decode).
cudaError_t exl3_decode(const Exl3DeviceMatrix& w, uint16_t* q, cudaStream_t stream);
// The same Q by exl3_linear's decoder (each warp lane its eight elements of a tile, in bitstream
// order), so that the tests hold that decoder to exl3_decode bit for bit.
cudaError_t exl3_decode_lanes(const Exl3DeviceMatrix& w, uint16_t* q, cudaStream_t stream);

// Floats of scratch exl3_linear needs for n tokens (the k slices' partial sums; at most
// padded_cols / 128 slices of n * padded_rows).
int64_t exl3_linear_scratch_floats(const Exl3DeviceMatrix& w, int n);

// y [n, rows] = x [n, cols] · W^T for 1 <= n <= 8 (cpu::linear_rows over all rows, up to rounding).
// `scratch` holds exl3_linear_scratch_floats(w, n) floats; the trellis must be 4-byte aligned.
cudaError_t exl3_linear(const Exl3DeviceMatrix& w, const float* x, int n, float* scratch, float* y,
                        cudaStream_t stream);

}  // namespace frank::cuda
