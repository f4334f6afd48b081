#pragma once
// The GPU's part in a MoE step whose routed experts are split between GPU and CPU (issue 7;
// cuda::CpuExperts and CudaOps::moe): the GPU's share of the routing, the handshake with the host
// thread that computes the CPU's share, and the CPU's sum added back. Asynchronous on `stream`, no
// allocation, no host call: a split step can be captured as a CUDA graph (ops.cuh's contract).
#include <cstdint>

#include <cuda_runtime.h>

#include "frank/core/handshake_worker.h"

namespace frank::cuda {

// gpu_experts[i] = experts[i], or -1 where it is a CPU-homed expert (on_cpu[e] != 0, on_cpu [E]);
// moe_experts skips -1, so the GPU computes the shared expert and the GPU-homed routings only.
cudaError_t drop_cpu_experts(const int32_t* experts, int count, const uint8_t* on_cpu, int E, int32_t* gpu_experts,
                             cudaStream_t stream);

// out[i] += partial[i] for i < count (`partial` may be host-mapped memory).
cudaError_t add_partial(float* out, const float* partial, int64_t count, cudaStream_t stream);

// ---- the handshake (cpu_experts.h) -----------------------------------------------------------
//
// Each hand-over of a layer gets the next sequence number, counted on the device (HandshakeCounters:
// a graph replays the same parameters, so the number cannot be one). The GPU publishes it in the
// mailbox's `request` (core/handshake_worker.h: in host-mapped pinned memory) after the layer's
// inputs; the host's HandshakeWorker publishes it in `done` after the layer's sum. Hand-overs are
// strictly sequential (the GPU waits for sum s before it can hand over s + 1), so one mailbox and
// one set of buffers serve every layer.

// In device memory, zero at first.
struct HandshakeCounters {
  uint64_t issued;          // the last sequence number handed over
  unsigned blocks_arrived;  // hand_over_layer's blocks done copying (the last one publishes)
};

// Copies x [n, D], experts and weights [n, k] to the host buffers (host-mapped pointers), then
// increments counters->issued and publishes it, with `layer` and n, in mailbox->request (a
// system-scope release: the host that reads it sees the copies).
cudaError_t hand_over_layer(const float* x, int n, int D, const int32_t* experts, const float* weights, int k,
                            int layer, float* host_x, int32_t* host_experts, float* host_weights,
                            HandshakeCounters* counters, HandshakeMailbox* mailbox, cudaStream_t stream);

// Waits (one thread spinning on a system-scope acquire) until mailbox->done reaches
// counters->issued (kAborted passes too): the host's sum of the last hand-over is in its buffer.
cudaError_t wait_for_host(const HandshakeCounters* counters, const HandshakeMailbox* mailbox, cudaStream_t stream);

}  // namespace frank::cuda
