#pragma once
// The three ExLlamaV3 (EXL3) codebooks: a 16-bit trellis state -> one fp16 weight, computed (no
// stored table). Bit-exact with ExLlamaV3's CUDA decode (`ext/quant/codebook.cuh`); the math and
// the rounding argument are in docs/exl3-format.md §2 (shared docs).
#include <cstdint>
#include <string_view>

namespace frank::cpu {

// Which codebook a tensor uses is told by a marker tensor next to its trellis: `.mcg`, `.mul1`, or
// neither for 3INST (only the marker's presence counts, never its value).
enum class Exl3Codebook { ThreeInst, Mcg, Mul1 };

std::string_view exl3_codebook_name(Exl3Codebook codebook);  // "3inst", "mcg", "mul1"

// fp16 bits of the weight that `state` decodes to.
std::uint16_t exl3_codebook_value(Exl3Codebook codebook, std::uint16_t state);

}  // namespace frank::cpu
