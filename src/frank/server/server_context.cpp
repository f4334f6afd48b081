#include "frank/server/server_context.h"

#include <atomic>
#include <random>

#include "frank/server/api_error.h"
#include "frank/server/request_fields.h"

namespace frank::server {

std::shared_ptr<Job> ServerContext::submit(GenerationRequest request) {
  auto job = std::make_shared<Job>(std::move(request));
  if (!scheduler.submit(job)) {
    metrics.add("frank_requests_total", 1, {{"outcome", "rejected"}});
    throw ApiError(429, fmt::format("the request queue is full ({} waiting); retry later", options.max_queue),
                   "", "queue_full");
  }
  return job;
}

GenerationRequest ServerContext::generation_fields(const nlohmann::json& body, std::vector<int32_t> prompt) const {
  const RequestFields f(body);
  if (f.get<int>("n", 1) != 1) throw ApiError(400, "only n = 1 is supported", "n");
  GenerationRequest g;
  if (prompt.empty()) throw ApiError(400, "the prompt is empty", "prompt");
  if (static_cast<int>(prompt.size()) >= options.context_length)
    throw ApiError(422,
                   fmt::format("the prompt has {} tokens; the context length is {}", prompt.size(),
                               options.context_length),
                   "prompt", "context_length_exceeded");
  g.prompt = std::move(prompt);
  // OpenAI's newer name wins over the older one.
  const int remaining = options.context_length - static_cast<int>(g.prompt.size());
  g.max_tokens = f.get_in_range<int>("max_tokens", std::min(remaining, 1 << 20), 1, 1 << 20);
  g.max_tokens = f.get_in_range<int>("max_completion_tokens", g.max_tokens, 1, 1 << 20);
  g.sampling.temperature = f.get_in_range<double>("temperature", 1.0, 0.0, 2.0);
  g.sampling.top_p = static_cast<float>(f.get_in_range<double>("top_p", 1.0, 1e-9, 1.0));
  g.sampling.seed = f.has("seed") ? static_cast<uint64_t>(f.get<int64_t>("seed", 0)) : std::random_device{}();
  g.ignore_eos = f.get<bool>("ignore_eos", false);
  if (f.has("forced_completion_ids"))
    g.forced_completion = f.token_ids("forced_completion_ids", model.config().vocab_size);
  if (f.has("timeout"))
    g.deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(
                                    1000 * f.get_in_range<double>("timeout", 0.0, 1e-3, 86400.0)));
  return g;
}

std::string new_request_id(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  return fmt::format("{}-{:x}{:06x}", prefix, salt & 0xffffff, counter++);
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string ServerContext::token_name(int32_t id, bool as_ids) const {
  return as_ids ? "token_id:" + std::to_string(id) : tokenizer.decode(std::span<const int32_t>(&id, 1));
}

}  // namespace frank::server
