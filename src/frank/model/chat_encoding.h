#pragma once
// DeepSeek-V4's chat encoding: the prompt string that DeepSeek's reference encoder
// (encoding/encoding_dsv4.py of deepseek-ai/DeepSeek-V4-Flash, encode_messages) produces for an
// OpenAI-style request. docs/chat.md describes the request fields and how they map.
//
// The prompt begins with the BOS token's text, so its token ids are tokenizer.encode(prompt)
// with no BOS added (DeepSeek's tokenizer adds none itself either).
#include <nlohmann/json.hpp>
#include <string>

#include "frank/model/chat_request.h"

namespace frank::model {

// Throws frank::Error for a request the encoder cannot express (see parse_chat_request).
std::string encode_chat(const nlohmann::ordered_json& request);
std::string encode_chat(const ChatRequest& request);

}  // namespace frank::model
