#include "frank/cpu/quant/exl3_matrix.h"

#include <fmt/format.h>

#include "frank/core/error.h"
#include "frank/cpu/quant/hadamard.h"

namespace frank::cpu {

std::int64_t exl3_padded(std::int64_t features) {
  return (features + kHadamardBlock - 1) / kHadamardBlock * kHadamardBlock;
}

void validate(const Exl3Matrix& w) {
  validate(w.trellis);
  if (w.rows < 0 || w.cols < 0 || w.padded_rows() != exl3_padded(w.rows) || w.padded_cols() != exl3_padded(w.cols))
    throw Error(fmt::format("EXL3 weight [{}, {}]: its trellis covers [{}, {}] (in, out), not both dimensions "
                            "rounded up to multiples of {} (the Hadamard blocks)",
                            w.rows, w.cols, w.padded_cols(), w.padded_rows(), kHadamardBlock));
  if ((w.rows > 0 && w.svh == nullptr) || (w.cols > 0 && w.suh == nullptr))
    throw Error(fmt::format("EXL3 weight [{}, {}]: missing suh / svh", w.rows, w.cols));
}

Exl3Matrix exl3_view(const QuantizedMatrix& w) {
  if (w.format != QuantizedMatrix::Format::Exl3) throw Error("exl3_view: the matrix is not EXL3");
  const std::int64_t padded_rows = exl3_padded(w.rows), padded_cols = exl3_padded(w.cols);
  const Exl3Matrix view{Exl3Trellis{w.trellis.data(), padded_cols / kExl3TileSide, padded_rows / kExl3TileSide,
                                    w.bits, w.codebook},
                        w.suh.data(), w.svh.data(), w.rows, w.cols};
  validate(view);
  const auto words = static_cast<size_t>(view.trellis.tiles_k * view.trellis.tiles_n * view.trellis.words_per_tile());
  if (w.trellis.size() != words || w.suh.size() != static_cast<size_t>(padded_cols) ||
      w.svh.size() != static_cast<size_t>(padded_rows))
    throw Error(fmt::format("EXL3 weight [{}, {}] at {} bits: {} trellis words, {} suh and {} svh values "
                            "(expected {}, {} and {})",
                            w.rows, w.cols, w.bits, w.trellis.size(), w.suh.size(), w.svh.size(), words, padded_cols,
                            padded_rows));
  return view;
}

}  // namespace frank::cpu
