#pragma once
// POST /v1/completions: a prompt (text or token ids) continued by the model, OpenAI's legacy
// completions format, streaming or not, with logprobs, echo and stop sequences.
#include <httplib.h>

#include "frank/server/server_context.h"

namespace frank::server {

void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace frank::server
