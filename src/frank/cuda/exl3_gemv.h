#pragma once
// EXL3 (ExLlamaV3) weights on the GPU: decoding the trellis and y = W x for 1-8 tokens, each
// tile decoded where it is used (no dequantised copy of W). The math, the layout and the fixed
// order of every fp32 operation are the CPU reference's (cpu/quant/exl3_gemv.h, exl3_kernels.h):
// every product and sum is a separately rounded __fmul_rn / __fadd_rn in that order, so the GPU's
// results equal the CPU's bit for bit (tests/cuda/test_cuda_exl3.cpp). One thread computes one
// output column of a 128-output block over all of k; the grid is the output blocks. Not yet tuned
// for bandwidth: a k-split or the tensor-core fragment path of ExLlamaV3 would change the order.
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

// y [n, rows] = x [n, cols] · W^T for n <= 8 (cpu::linear_rows over all rows). `u` is scratch of
// n * padded_cols floats (the transformed input).
cudaError_t exl3_linear(const Exl3DeviceMatrix& w, const float* x, int n, float* u, float* y, cudaStream_t stream);

}  // namespace frank::cuda
