#pragma once
// The device side of the K=V row formats (layout in ops.cuh; engine/kv_record.cpp is the CPU
// reference, which the encoder here must match bit for bit): a loader of 4 values at a time,
// dequantised to fp32, and a block-cooperative encoder. Kernels are templated on the format, so
// each one has a single code path and fp32 rows compile to plain float4 loads and stores.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "frank/engine/kv_record.h"

namespace frank::cuda {

using engine::KvFormat;
using engine::KvRowLayout;

template <KvFormat F>
using KvFormatTag = std::integral_constant<KvFormat, F>;

// Calls launch(KvFormatTag<F>{}) for the runtime format f: the one switch from a runtime format to
// a kernel instantiation.
template <class Launch>
cudaError_t with_kv_format(KvFormat f, Launch&& launch) {
  switch (f) {
    case KvFormat::F32: return launch(KvFormatTag<KvFormat::F32>{});
    case KvFormat::BF16: return launch(KvFormatTag<KvFormat::BF16>{});
    case KvFormat::FP8: return launch(KvFormatTag<KvFormat::FP8>{});
  }
  return cudaErrorInvalidValue;
}

__device__ __forceinline__ float4 bf16x4_to_float4(uint32_t lo, uint32_t hi) {
  // bf16 is the top half of an fp32: widening is a shift.
  return make_float4(__uint_as_float(lo << 16), __uint_as_float(lo & 0xFFFF0000u), __uint_as_float(hi << 16),
                     __uint_as_float(hi & 0xFFFF0000u));
}

__device__ __forceinline__ float e4m3_to_float(uint8_t b) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(b), __NV_E4M3)));
}

// Values 4c .. 4c+3 of a stored row (rows start 8-byte aligned, 16-byte for fp32: row_bytes is a
// multiple of 8, and of 16 for fp32 since dim % 4 == 0).
template <KvFormat F>
__device__ __forceinline__ float4 load_kv4(const uint8_t* row, int c, const KvRowLayout& l) {
  if constexpr (F == KvFormat::F32) {
    return reinterpret_cast<const float4*>(row)[c];
  } else if constexpr (F == KvFormat::BF16) {
    const uint2 u = reinterpret_cast<const uint2*>(row)[c];
    return bf16x4_to_float4(u.x, u.y);
  } else {
    const int i = 4 * c;
    if (i >= l.nope) {  // RoPE dims, bf16 (4-byte aligned: nope and rope_offset are multiples of 4)
      const uint32_t* p = reinterpret_cast<const uint32_t*>(row + l.rope_offset + 2 * (i - l.nope));
      return bf16x4_to_float4(p[0], p[1]);
    }
    const uint32_t q = *reinterpret_cast<const uint32_t*>(row + i);
    const float s = __uint_as_float(static_cast<uint32_t>(row[l.scale_offset + i / engine::kKvScaleBlock]) << 23);
    return make_float4(e4m3_to_float(q & 0xFF) * s, e4m3_to_float((q >> 8) & 0xFF) * s,
                       e4m3_to_float((q >> 16) & 0xFF) * s, e4m3_to_float(q >> 24) * s);
  }
}

// The ue8m0 exponent of a block whose largest magnitude is amax: ceil(log2(max(amax, 1e-4) / 448))
// with the quotient rounded to fp32 (engine::kv_scale_exponent). The quotient is a normal float, so
// the ceiling is its exponent, plus one when any mantissa bit is set.
__device__ __forceinline__ int kv_scale_exponent(float amax) {
  const uint32_t q = __float_as_uint(__fdiv_rn(fmaxf(amax, 1e-4f), 448.f));
  return static_cast<int>((q >> 23) & 0xFF) - 127 + ((q & 0x7FFFFFu) != 0 ? 1 : 0);
}

// Writes the row of values v (dim floats, readable by the whole block) as one record at `row`.
// Every thread of the block calls it; blockDim.x is a multiple of 32. fp8: a warp per 64-value
// block (two values per lane, the block's amax by a warp max).
template <KvFormat F>
__device__ void store_kv_row(const float* v, uint8_t* row, const KvRowLayout& l) {
  if constexpr (F == KvFormat::F32) {
    float* out = reinterpret_cast<float*>(row);
    for (int c = threadIdx.x; c < l.dim; c += blockDim.x) out[c] = v[c];
  } else if constexpr (F == KvFormat::BF16) {
    __nv_bfloat16* out = reinterpret_cast<__nv_bfloat16*>(row);
    for (int c = threadIdx.x; c < l.dim; c += blockDim.x) out[c] = __float2bfloat16_rn(v[c]);
  } else {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    const int blocks = (l.nope + engine::kKvScaleBlock - 1) / engine::kKvScaleBlock;
    for (int b = warp; b < blocks; b += warps) {
      const int first = b * engine::kKvScaleBlock;
      const int n = min(engine::kKvScaleBlock, l.nope - first);
      float amax = 0.f;
      for (int i = lane; i < n; i += 32) amax = fmaxf(amax, fabsf(v[first + i]));
      for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xFFFFFFFFu, amax, o));
      const int e = kv_scale_exponent(amax);
      const float inverse = __uint_as_float(static_cast<uint32_t>(127 - e) << 23);  // 2^-e: x * 2^-e == x / s
      for (int i = lane; i < n; i += 32)
        row[first + i] = static_cast<uint8_t>(__nv_cvt_float_to_fp8(v[first + i] * inverse, __NV_SATFINITE, __NV_E4M3));
      if (lane == 0) row[l.scale_offset + b] = static_cast<uint8_t>(e + 127);
    }
    __nv_bfloat16* rope = reinterpret_cast<__nv_bfloat16*>(row + l.rope_offset);
    for (int i = threadIdx.x; i < l.rope_dims; i += blockDim.x) rope[i] = __float2bfloat16_rn(v[l.nope + i]);
    for (int p = l.scale_offset + blocks + threadIdx.x; p < l.row_bytes; p += blockDim.x) row[p] = 0;
  }
}

}  // namespace frank::cuda
