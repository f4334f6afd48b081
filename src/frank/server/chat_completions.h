#pragma once
// POST /v1/chat/completions: messages (with tools and thinking options) encoded as DeepSeek-V4's
// prompt, the generated text parsed back into content, reasoning_content and tool_calls, streamed
// as OpenAI chunks or returned whole.
#include <httplib.h>

#include "frank/server/server_context.h"

namespace frank::server {

void handle_chat_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res);

}  // namespace frank::server
