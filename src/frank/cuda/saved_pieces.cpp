#include "frank/cuda/saved_pieces.h"

namespace frank::cuda {

void SavedPieces::save(cudaStream_t stream) {
  int64_t total = 0;
  for (auto& p : pieces) {
    p.offset = total;
    total += (p.bytes + 15) / 16 * 16;
  }
  saved = DeviceArray<uint8_t>({total}, stream);
  std::vector<ByteCopy> copies;
  for (const auto& p : pieces) copies.push_back({p.at, saved.data() + p.offset, p.bytes});
  run_copies(copies, stream);
}

void SavedPieces::restore_copies(int64_t keep, std::vector<ByteCopy>& copies) const {
  for (const auto& p : pieces)
    if (p.token < 0 || p.token >= keep) copies.push_back({saved.data() + p.offset, p.at, p.bytes});
}

void run_copies(const std::vector<ByteCopy>& copies, cudaStream_t stream) {
  if (copies.empty()) return;
  DeviceArray<uint8_t> table({static_cast<int64_t>(copies.size() * sizeof(ByteCopy))}, stream);
  table.copy_from_host(reinterpret_cast<const uint8_t*>(copies.data()));
  check(copy_bytes(reinterpret_cast<const ByteCopy*>(table.data()), static_cast<int>(copies.size()), stream),
        "copy_bytes");
}

}  // namespace frank::cuda
