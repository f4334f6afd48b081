// The KV compressor over a chunk of tokens (contract in ops.cuh; engine::Compressor::push).
//
// Two kernels, in this order on the one stream, because the state is updated in place:
//   emit:  one block per window the chunk closes, one thread per channel (strided). A channel's
//          slots are pooled with an online softmax over their gates; the block then RMS-normalises
//          the entry, applies RoPE and stores it in the entries' row format (kv_rows.cuh). Tokens
//          before the chunk come from the old pending rows and the old overlap, which this kernel
//          only reads.
//   carry: the state for the next call. Each thread owns one element (row j, column) of pending:
//          it first builds the new overlap from it (the last closed window's Ca half, which may
//          still sit in the old pending row j when that window began before the chunk), then
//          overwrites it with the open window's token j from the chunk. Read-then-write by the
//          same thread is what makes the in-place update safe.
#include <cmath>
#include <cstdint>

#include "frank/cuda/kv_rows.cuh"
#include "frank/cuda/launch.cuh"
#include "frank/cuda/ops.cuh"
#include "frank/cuda/warp_reduce.cuh"

namespace frank::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxDim = 1024;

// One call's inputs. Windows w < first_window closed before the chunk; window first_window is the
// one open at `start` (its tokens before `start` are in pending). The launcher knows the chunk's
// position only as device memory (start_at): each kernel reads it first, with at().
struct Chunk {
  CompressorBuffers b;
  const float* kv;
  const float* gate;
  const float* bias;  // [ratio, width]
  const int64_t* start_at;
  int64_t start, first_window;
  int n, ratio, dim, width;
  bool overlapping;

  __device__ Chunk at() const {
    Chunk k = *this;
    k.start = *start_at;
    k.first_window = k.start / ratio;
    return k;
  }

  // The raw projections (kv, gate without bias) of position p >= first_window * ratio at column col.
  __device__ void token(int64_t p, int col, float& x, float& g) const {
    if (p < start) {
      const int64_t i = (p % ratio) * width + col;
      x = b.pending_kv[i];
      g = b.pending_gate[i];
    } else {
      const int64_t i = (p - start) * width + col;
      x = kv[i];
      g = gate[i];
    }
  }
};

// Adds a slot (value x, gate g) to an online softmax-weighted sum: m the largest gate so far, s the
// sum of exp(g - m), a the sum of exp(g - m) * x.
__device__ void pool(float x, float g, float& m, float& s, float& a) {
  if (g > m) {
    const float r = expf(m - g);  // 0 for the first slot (m = -inf)
    s = s * r + 1.f;
    a = a * r + x;
    m = g;
  } else {
    const float e = expf(g - m);
    s += e;
    a += e * x;
  }
}

template <KvFormat F>
__global__ void __launch_bounds__(kThreads)
    emit_kernel(Chunk chunk, KvRowLayout entry, const float* norm_weight, float eps, const float* inv_freq,
                int pairs) {
  follow_previous_kernel();
  __shared__ float v[kMaxDim];
  __shared__ float partial[kThreads / 32];
  const Chunk k = chunk.at();
  const int64_t w = k.first_window + blockIdx.x;
  if (w >= (k.start + k.n) / k.ratio) return;  // the grid covers the most windows n tokens can close
  const int own = k.overlapping ? k.dim : 0;  // CSA pools the Cb half of its own tokens
  float sq = 0.f;
  for (int c = threadIdx.x; c < k.dim; c += blockDim.x) {
    float m = -INFINITY, s = 0.f, a = 0.f, x, g;
    if (k.overlapping && w > 0)  // Ca half of window w-1 (none before the first window)
      for (int j = 0; j < k.ratio; ++j) {
        if (w == k.first_window) {  // closed before the chunk: in overlap, already biased
          x = k.b.overlap_kv[j * k.dim + c];
          g = k.b.overlap_gate[j * k.dim + c];
        } else {
          k.token((w - 1) * k.ratio + j, c, x, g);
          g += k.bias[j * k.width + c];
        }
        pool(x, g, m, s, a);
      }
    for (int j = 0; j < k.ratio; ++j) {
      k.token(w * k.ratio + j, own + c, x, g);
      pool(x, g + k.bias[j * k.width + own + c], m, s, a);
    }
    v[c] = a / s;
    sq += v[c] * v[c];
  }
  // RMSNorm over dim: block sum of squares.
  sq = block_sum(sq, partial);
  const float inv = 1.f / sqrtf(sq / static_cast<float>(k.dim) + eps);
  for (int c = threadIdx.x; c < k.dim; c += blockDim.x) {
    v[c] *= inv;
    if (norm_weight) v[c] *= norm_weight[c];
  }
  __syncthreads();
  // RoPE at position w * ratio on the trailing 2*pairs channels, interleaved pairs: a thread per pair.
  const int rope_first = k.dim - 2 * pairs;
  const float position = static_cast<float>(w * k.ratio);
  for (int i = threadIdx.x; i < pairs; i += blockDim.x) {
    const float angle = inv_freq[i] * position;
    const float cs = cosf(angle), sn = sinf(angle);
    const float re = v[rope_first + 2 * i], im = v[rope_first + 2 * i + 1];
    v[rope_first + 2 * i] = re * cs - im * sn;
    v[rope_first + 2 * i + 1] = im * cs + re * sn;
  }
  __syncthreads();
  store_kv_row<F>(v, k.b.entries + w * entry.row_bytes, entry);
}

__global__ void carry_kernel(Chunk chunk) {
  follow_previous_kernel();
  const Chunk k = chunk.at();
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<int64_t>(k.ratio) * k.width) return;
  const int j = static_cast<int>(idx / k.width), col = static_cast<int>(idx % k.width);
  const int64_t end = k.start + k.n;
  const int64_t open_window = end / k.ratio;  // the window still open after the chunk
  if (k.overlapping && open_window > k.first_window && col < k.dim) {
    float x, g;
    k.token((open_window - 1) * k.ratio + j, col, x, g);
    k.b.overlap_kv[j * k.dim + col] = x;
    k.b.overlap_gate[j * k.dim + col] = g + k.bias[idx];
  }
  const int64_t p = open_window * k.ratio + j;
  if (p >= k.start && p < end) {
    k.b.pending_kv[idx] = k.kv[(p - k.start) * k.width + col];
    k.b.pending_gate[idx] = k.gate[(p - k.start) * k.width + col];
  }
}

}  // namespace

cudaError_t compress_chunk(const CompressorBuffers& b, const float* kv, const float* gate, int n,
                           const int64_t* start, int ratio, int dim, bool overlapping, const float* position_bias,
                           const float* norm_weight, float eps, const float* inv_freq, int pairs,
                           const KvRowLayout& entry, cudaStream_t stream) {
  if (!b.pending_kv || !b.pending_gate || !b.entries || !position_bias || !start || n < 0 || ratio < 1 ||
      dim < 1 || dim > kMaxDim || pairs < 0 || 2 * pairs > dim || (pairs > 0 && !inv_freq))
    return cudaErrorInvalidValue;
  if (entry.dim != dim || entry.rope_dims != 2 * pairs || entry.nope != dim - 2 * pairs || entry.row_bytes < 1)
    return cudaErrorInvalidValue;
  if ((overlapping && (!b.overlap_kv || !b.overlap_gate)) || (n > 0 && (!kv || !gate))) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const int width = (overlapping ? 2 : 1) * dim;
  const Chunk k{b, kv, gate, position_bias, start, 0, 0, n, ratio, dim, width, overlapping};
  // n tokens close at most ceil(n / ratio) windows, wherever they start; blocks past the windows
  // this chunk closes return at once.
  const int64_t most_closed = (static_cast<int64_t>(n) + ratio - 1) / ratio;
  if (const cudaError_t e = with_kv_format(entry.format, [&](auto format) {
        return launch_dependent(emit_kernel<decltype(format)::value>, dim3(static_cast<unsigned>(most_closed)),
                                dim3(kThreads), 0, stream, k, entry, norm_weight, eps, inv_freq, pairs);
      }))
    return e;
  if (const cudaError_t e = cudaGetLastError()) return e;
  const int64_t elements = static_cast<int64_t>(ratio) * width;
  if (const cudaError_t e =
          launch_dependent(carry_kernel, dim3(static_cast<unsigned>((elements + kThreads - 1) / kThreads)),
                           dim3(kThreads), 0, stream, k))
    return e;
  return cudaGetLastError();
}

}  // namespace frank::cuda
