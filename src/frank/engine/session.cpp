#include "frank/engine/session.h"

namespace frank::engine {

Session::Session(const model::ModelConfig& c) : layers(c.num_layers) {
  for (auto& layer : layers) layer.window.assign(static_cast<size_t>(c.sliding_window) * c.head_dim, 0.0f);
}

}  // namespace frank::engine
