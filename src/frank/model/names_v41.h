#pragma once
// DeepSeek-V4.1 tensor-name spellings. frank names every weight by its released checkpoint key
// (`layers.2.attn.indexer.wk.weight`, `layers.1.engram.embed.weight`); a checkpoint may instead use
// transformers' module names (`model.layers.2.self_attn.indexer.k_proj.weight`,
// `model.engram_tables.1.weight`), the inverse of the conversion the fixture generator applies
// (tools/reference/make_dsv41_fixtures.py NATIVE_RENAMES).
#include <string>
#include <vector>

namespace frank::model {

// Every spelling of the V4.1 tensor whose released name is `official`, released name first.
std::vector<std::string> v41_name_candidates(const std::string& official);

// Image-side tensors (vision tower, aligner, image-span embeddings) in either spelling.
bool is_v41_vision_tensor(const std::string& name);

}  // namespace frank::model
