#pragma once
// What a verify call's device checkpoint saves (device_checkpoint.h for V4, device_v41_checkpoint.h
// for V4.1): pieces of session state in device memory that the call can overwrite, copied into one
// buffer before the call and back by a rewind, each way in one kernel (byte_copies.cuh).
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "frank/cuda/byte_copies.cuh"
#include "frank/cuda/device_array.h"

namespace frank::cuda {

struct SavedPieces {
  // `bytes` at `at`, kept at `offset` of `saved`. `token`: the call's token that overwrites the
  // piece (restored only when that token is not kept); -1: always restored.
  struct Piece {
    uint8_t* at;
    int64_t offset, bytes, token;
  };
  DeviceArray<uint8_t> saved;
  std::vector<Piece> pieces;

  void add(void* at, int64_t bytes, int64_t token) { pieces.push_back({static_cast<uint8_t*>(at), 0, bytes, token}); }
  // Lays the pieces out in `saved` (each 16-byte aligned) and copies them there, on `stream`.
  void save(cudaStream_t stream);
  // Appends to `copies` what puts back the pieces a rewind to `keep` of the call's tokens restores.
  void restore_copies(int64_t keep, std::vector<ByteCopy>& copies) const;
};

// Runs `copies` on the stream (one kernel); the table goes to the device first.
void run_copies(const std::vector<ByteCopy>& copies, cudaStream_t stream);

}  // namespace frank::cuda
