#pragma once
// Shared by the FP8 / FP4 tests: the golden data of tools/reference/make_quant_fixtures.py
// (ml_dtypes + numpy float64) and the error bound every kernel level must meet.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "frank/model/safetensors.h"

namespace frank::test {

inline std::filesystem::path quant_fixture_dir() { return std::filesystem::path(FRANK_FIXTURE_DIR) / "quant"; }

class QuantGolden {
 public:
  QuantGolden() : file_(model::SafetensorsFile::open(quant_fixture_dir() / "gemv.safetensors")) {}

  template <typename T>
  std::vector<T> get(const std::string& name) const {
    const auto bytes = file_.bytes(file_.tensors().at(name));
    std::vector<T> out(bytes.size() / sizeof(T));
    std::memcpy(out.data(), bytes.data(), bytes.size());
    return out;
  }
  const std::vector<int64_t>& shape(const std::string& name) const { return file_.tensors().at(name).shape; }
  const std::string& metadata(const std::string& key) const { return file_.metadata().at(key); }

 private:
  model::SafetensorsFile file_;
};

// An fp32 sum of `cols` products, in any order, with or without FMA, is within
// gamma(cols) * sum_j |W_ij x_j| of the exact value (Higham, Accuracy and Stability of Numerical
// Algorithms, eq. 3.5), gamma(k) = k u / (1 - k u) with u = 2^-24, which is <= cols * 2^-23 while
// cols <= 2^23. The golden y is float64 numpy, itself within cols * 2^-52 * sum|W x|: added too.
// Products here are far from fp32's subnormal range, so there is no underflow term.
inline double fp32_dot_error_bound(int64_t cols, double abs_sum) {
  return static_cast<double>(cols) * (0x1p-23 + 0x1p-52) * abs_sum;
}

}  // namespace frank::test
