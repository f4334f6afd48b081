#pragma once
// EXL3 (ExLlamaV3) matrices for synthetic models: random ones with host data, and shape-only ones
// whose trellis and sign vectors a GPU makes in device memory (`frank bench decode --format
// exl3-kN`). Any bit pattern is a valid trellis (shared docs/exl3-format.md §2), so random words
// are a valid encoding. The sign vectors hold random signs times magnitudes 0.5..1.5 times a scale:
// suh 1/sqrt(cols), svh 1, so W = diag(suh) H Q H diag(svh) has entries ~ 1/sqrt(in) like a
// trained Linear (the codebooks' Q has RMS ~1, the Hadamards are orthonormal).
#include <cstdint>
#include <string>

#include "frank/core/linear_weight.h"

namespace frank::model {

// Where each part's random values come from.
struct Exl3Seeds {
  uint64_t trellis = 0, suh = 0, svh = 0;
};
// Three seeds drawn from one.
Exl3Seeds exl3_seeds(uint64_t seed);

// A random EXL3 Linear [rows = out, cols = in] at `bits` (1..8), padded as ExLlamaV3 pads.
QuantizedMatrix random_exl3(int64_t rows, int64_t cols, int bits, Exl3Codebook codebook, const Exl3Seeds& seeds);

// An EXL3 Linear [rows, cols] at `bits` with its shape alone (trellis, suh and svh empty), 3INST.
// Throws frank::Error naming `name` unless rows and cols are multiples of 128 (the GPU's tiles and
// Hadamard blocks need no padding then) and bits is 1..8.
QuantizedMatrix exl3_shape_only(const std::string& name, int64_t rows, int64_t cols, int bits);

}  // namespace frank::model
