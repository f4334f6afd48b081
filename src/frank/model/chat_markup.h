#pragma once
// The literal markup of DeepSeek-V4's chat format: special tokens and the DSML tags of tool calls,
// spelled as DeepSeek's reference encoder (encoding/encoding_dsv4.py) writes them. The encoder and
// the parser share these so the two cannot drift apart.
#include <string_view>

namespace frank::model::markup {

inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kUser = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kDsml = "｜DSML｜";

inline constexpr std::string_view kToolCallsStart = "\n\n<｜DSML｜tool_calls";  // opens a block after content
inline constexpr std::string_view kToolCallsEnd = "</｜DSML｜tool_calls>";
inline constexpr std::string_view kInvokeOpen = "<｜DSML｜invoke";
inline constexpr std::string_view kInvokeClose = "</｜DSML｜invoke";
inline constexpr std::string_view kParameterOpen = "<｜DSML｜parameter";
inline constexpr std::string_view kParameterClose = "</｜DSML｜parameter";

inline constexpr std::string_view kToolResultOpen = "<tool_result>";
inline constexpr std::string_view kToolResultClose = "</tool_result>";

}  // namespace frank::model::markup
