#!/usr/bin/env python3
"""Golden chat fixtures for frank's DeepSeek-V4 chat encoding and tool-call parser.

Runs DeepSeek's own reference encoder (encoding/encoding_dsv4.py of deepseek-ai/DeepSeek-V4-Flash,
obtained and checked by get_dsv4_encoder.py) on OpenAI-style requests and writes one JSON line
per conversation to tests/fixtures/chat/dsv4_conversations.jsonl:

    {"name": ..., "request": <OpenAI-style request>,
     "encoder_call": {"messages": ..., "thinking_mode": ..., "reasoning_effort": ...},
     "prompt": <the exact prompt string>, "ids": <its token ids: HF tokenizers' encode(prompt)>,
     "completions": [{"message_index": k, "thinking_mode": ..., "text": <what the model generates
                      for assistant message k>, "reference": <DeepSeek's parse of that text>,
                      "original": <assistant message k as the request gave it>}]}

and one line per parser case to tests/fixtures/chat/dsv4_parser_cases.jsonl:

    {"name": ..., "thinking_mode": ..., "text": ..., "reference": <parse> | {"error": ...},
     "frank": "same" | "error"}   # "error": frank rejects what the reference accepts (see notes)

The prompt holds the BOS token's text, so its ids are encode(prompt) with nothing added; the script
checks that HF's add_special_tokens=True adds nothing to them either.

Usage (tokenizers 0.23.3, the version of the tokenizer fixtures, in a venv outside the repository):
    python tools/reference/get_dsv4_encoder.py --dest /tmp/dsv4-encoder [--from FILE --strip-header]
    python tools/reference/make_chat_fixtures.py --encoder /tmp/dsv4-encoder/encoding_dsv4.py \
        --tokenizer tests/fixtures/tokenizer/deepseek-v4/tokenizer.json --out tests/fixtures/chat
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import tokenizers

sys.path.insert(0, str(Path(__file__).resolve().parent))
from get_dsv4_encoder import SHA256 as ENCODER_SHA256  # noqa: E402

REQUIRED_TOKENIZERS = "0.23.3"

# ----------------------------------------------------------------------------------------------
# OpenAI-style request -> arguments of DeepSeek's encode_messages. frank's C++ (chat_request.cpp)
# implements the same rules; they are documented in docs/chat.md.
# ----------------------------------------------------------------------------------------------

# DeepSeek's API accepts "high" and "max"; OpenAI's lower levels map to high, "xhigh" to max.
REASONING_EFFORT = {"low": "high", "medium": "high", "high": "high", "max": "max", "xhigh": "max"}


def encoder_message(message: dict) -> dict:
    role = message["role"]
    if role in ("system", "user"):
        return {"role": role, "content": message["content"]}
    if role == "tool":
        return {"role": "tool", "tool_call_id": message["tool_call_id"], "content": message["content"]}
    out = {"role": "assistant", "content": message.get("content")}
    for key in ("reasoning_content", "tool_calls"):
        if message.get(key) is not None:
            out[key] = message[key]
    return out


def encoder_call(request: dict) -> dict:
    thinking = request.get("thinking") is None or request["thinking"]["type"] == "enabled"
    effort = request.get("reasoning_effort")
    messages = [encoder_message(m) for m in request["messages"]]
    tools = request.get("tools") or []
    if tools:
        # Request-level tools go on a leading system message, where DeepSeek renders them.
        if messages[0]["role"] == "system":
            messages[0]["tools"] = tools
        else:
            messages.insert(0, {"role": "system", "content": "", "tools": tools})
    return {
        "messages": messages,
        "thinking_mode": "thinking" if thinking else "chat",
        "reasoning_effort": REASONING_EFFORT[effort] if effort is not None else None,
    }


# ----------------------------------------------------------------------------------------------
# Conversations
# ----------------------------------------------------------------------------------------------


def tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required}}}


WEATHER = tool("get_weather", "Get the current weather for a city.",
               {"city": {"type": "string", "description": "City name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ["city"])
SEARCH = tool("web_search", "Search the web and return the top results.",
              {"query": {"type": "string"}, "max_results": {"type": "integer", "minimum": 1, "maximum": 20},
               "filters": {"type": "object", "properties": {"site": {"type": "string"},
                                                            "after": {"type": "string", "format": "date"}}}},
              ["query"])
WRITE_FILE = tool("write_file", "Write text to a file, replacing it.",
                  {"path": {"type": "string"}, "content": {"type": "string"}}, ["path", "content"])
CALCULATE = tool("calculate", "Évalue une expression — 计算器 🧮 (supports 1e-7 precision, scale 1.5).",
                 {"expression": {"type": "string"}, "precision": {"type": "number", "default": 0.5},
                  "options": {"type": "object", "properties": {"exact": {"type": "boolean"},
                                                               "limits": {"type": "array",
                                                                          "items": {"type": "number"}}}}},
                 ["expression"])
NO_ARGS = {"type": "function", "function": {"name": "get_time", "description": "Current UTC time.",
                                            "parameters": {"type": "object", "properties": {}}, "strict": True}}


def call(call_id: str, name: str, arguments) -> dict:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


def sys_(content):
    return {"role": "system", "content": content}


def user(content):
    return {"role": "user", "content": content}


def asst(content=None, reasoning=None, calls=None):
    message = {"role": "assistant", "content": content}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if calls is not None:
        message["tool_calls"] = calls
    return message


def tool_result(call_id: str, content):
    return {"role": "tool", "tool_call_id": call_id, "content": content}


DISABLED = {"type": "disabled"}
ENABLED = {"type": "enabled"}

NESTED_ARGS = {"query": "DeepSeek V4 \"DSML\" format", "max_results": 5,
               "filters": {"site": "huggingface.co", "after": "2026-04-01", "tags": ["llm", "moe"],
                           "weights": [0.1, 1.0, -0.0, 1e16, 1.5e-05, 123.456, 1e-7, 2.5e300],
                           "flags": {"exact": True, "fuzzy": False, "missing": None}},
               "big": 12345678901234567890, "negative": -42, "empty_list": [], "empty_object": {}}
TRICKY_STRINGS = {"path": "notes/naïve café ☕.md",
                  "content": "line 1\nline 2 with \"quotes\" and 'apostrophes'\n\ttab, back\\slash, "
                             "<tag attr=\"x\">html</tag>, emoji 🚀, 中文, العربية, control \u0001 \u001f, "
                             "\u2028 separator\r\nend"}

CONVERSATIONS: list[tuple[str, dict]] = [
    ("user_only_thinking_default", {"messages": [user("What is 2+2?")]}),
    ("user_only_chat", {"messages": [user("What is 2+2?")], "thinking": DISABLED}),
    ("system_user_chat", {"messages": [sys_("You are a helpful assistant."), user("Hello!")], "thinking": DISABLED}),
    ("system_user_thinking", {"messages": [sys_("You are a helpful assistant."), user("Hello!")], "thinking": ENABLED}),
    ("system_user_effort_max", {"messages": [sys_("Be precise."), user("Prove that √2 is irrational.")],
                                "thinking": ENABLED, "reasoning_effort": "max"}),
    ("system_user_effort_high", {"messages": [sys_("Be precise."), user("Factor 391.")],
                                 "reasoning_effort": "high"}),
    ("effort_low_maps_to_high", {"messages": [user("Quick: capital of Peru?")], "reasoning_effort": "low"}),
    ("effort_medium_maps_to_high", {"messages": [user("Sort [3,1,2].")], "reasoning_effort": "medium"}),
    ("effort_xhigh_maps_to_max", {"messages": [user("Is P = NP?")], "reasoning_effort": "xhigh"}),
    ("effort_max_ignored_without_thinking", {"messages": [user("Hi")], "thinking": DISABLED, "reasoning_effort": "max"}),
    ("system_only_chat", {"messages": [sys_("You are terse.")], "thinking": DISABLED}),
    ("system_only_thinking_effort_max", {"messages": [sys_("You are terse.")], "reasoning_effort": "max"}),
    ("empty_user_content", {"messages": [user("")]}),
    ("empty_system_content", {"messages": [sys_(""), user("Hi")], "thinking": DISABLED}),
    ("multi_turn_chat", {"messages": [sys_("You are a helpful assistant."), user("Hi"), asst("Hello! How can I help?"),
                                      user("Tell me a joke.")], "thinking": DISABLED}),
    ("multi_turn_chat_reasoning_ignored", {"messages": [user("Hi"), asst("Hello!", reasoning="greet back"),
                                                        user("Bye")], "thinking": DISABLED}),
    ("multi_turn_thinking_dropped", {"messages": [sys_("You are a helpful assistant."), user("Hi"),
                                                  asst("Hello!", reasoning="The user said hello."),
                                                  user("Capital of France?")]}),
    ("three_turns_thinking_dropped", {"messages": [user("a"), asst("A", reasoning="ra"), user("b"),
                                                   asst("B", reasoning="rb"), user("c")],
                                      "reasoning_effort": "max"}),
    ("conversation_ends_with_assistant_thinking", {"messages": [user("Hi"), asst("Hello!", reasoning="Greeting.")]}),
    ("conversation_ends_with_assistant_chat", {"messages": [sys_("S"), user("Hi"), asst("Hello!")],
                                               "thinking": DISABLED}),
    ("empty_assistant_content", {"messages": [user("Say nothing."), asst(""), user("Now say hi.")]}),
    ("consecutive_user_messages", {"messages": [user("First part."), user("Second part."), user("Third.")]}),
    ("system_after_user", {"messages": [user("Hi"), sys_("Late system note."), user("Continue")],
                           "thinking": DISABLED}),
    ("unicode_and_markup_content", {"messages": [
        sys_("Réponds en français. 用中文回答也可以。"),
        user("Explain <div class=\"x\">, JSON {\"a\": [1, 2]} and \\n escapes.\nSecond line\ttabbed 🎉 עברית")]}),
    ("tools_without_system_thinking", {"messages": [user("Weather in Paris?")], "tools": [WEATHER]}),
    ("tools_with_system_chat", {"messages": [sys_("You can call tools."), user("Weather in Paris?")],
                                "tools": [WEATHER, SEARCH], "thinking": DISABLED}),
    ("tools_complex_schema_unicode", {"messages": [sys_("Tools follow."), user("Compute 2^10.")],
                                      "tools": [CALCULATE, NO_ARGS], "reasoning_effort": "max"}),
    ("tool_choice_does_not_change_prompt", {"messages": [user("Weather?")], "tools": [WEATHER],
                                            "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
    ("single_tool_call_thinking", {"messages": [
        sys_("You are a weather bot."), user("Weather in Beijing?"),
        asst("", reasoning="The user wants the weather; call get_weather.",
             calls=[call("call_1", "get_weather", {"city": "Beijing", "unit": "celsius"})]),
        tool_result("call_1", "{\"temperature\": 22, \"condition\": \"sunny\"}"),
        asst("It is 22°C and sunny in Beijing.", reasoning="Got the data; answer."),
        user("And tomorrow?")], "tools": [WEATHER]}),
    ("parallel_calls_results_reordered_chat", {"messages": [
        user("Weather in Paris and Tokyo?"),
        asst(None, calls=[call("call_a", "get_weather", {"city": "Paris"}),
                          call("call_b", "get_weather", {"city": "Tokyo"})]),
        tool_result("call_b", "Tokyo: 18°C"), tool_result("call_a", "Paris: 12°C")],
        "tools": [WEATHER], "thinking": DISABLED}),
    ("consecutive_tool_results_then_user", {"messages": [
        user("Search twice."),
        asst("Searching.", reasoning="Two searches.", calls=[call("s1", "web_search", {"query": "a"}),
                                                             call("s2", "web_search", {"query": "b"}),
                                                             call("s3", "get_time", {})]),
        tool_result("s1", "result a"), tool_result("s3", "12:00"), tool_result("s2", "result b"),
        user("Also summarise them.")], "tools": [SEARCH, NO_ARGS]}),
    ("nested_json_arguments", {"messages": [
        user("Search with filters."),
        asst(None, reasoning="Use filters.", calls=[call("n1", "web_search", NESTED_ARGS)])],
        "tools": [SEARCH]}),
    ("tricky_string_arguments", {"messages": [
        user("Save my notes."),
        asst("Saving now.", calls=[call("w1", "write_file", TRICKY_STRINGS)]),
        tool_result("w1", "ok")], "tools": [WRITE_FILE], "thinking": DISABLED}),
    ("arguments_with_compact_json_text", {"messages": [
        user("calc"),
        asst(None, reasoning="", calls=[call("c1", "calculate",
                                             '{"expression":"2**10","options":{"exact":true,"limits":[1,2.50]},"precision":0.001}')]),
        tool_result("c1", "1024")], "tools": [CALCULATE]}),
    ("empty_arguments_call", {"messages": [
        user("What time is it?"), asst(None, reasoning="Call get_time.", calls=[call("t1", "get_time", "{}")]),
        tool_result("t1", "2026-05-01T12:00:00Z")], "tools": [NO_ARGS]}),
    ("tool_result_text_blocks", {"messages": [
        user("Weather?"), asst(None, calls=[call("b1", "get_weather", {"city": "Oslo"})]),
        tool_result("b1", [{"type": "text", "text": "Oslo: 3°C"}, {"type": "text", "text": "Wind: 20 km/h"}])],
        "tools": [WEATHER], "thinking": DISABLED}),
    ("agent_loop_multi_step_thinking", {"messages": [
        sys_("You are a coding agent."), user("Create hello.py and tell me the time."),
        asst("", reasoning="First write the file.",
             calls=[call("k1", "write_file", {"path": "hello.py", "content": "print(\"hello\")\n"})]),
        tool_result("k1", "written 15 bytes"),
        asst("", reasoning="Now the time.", calls=[call("k2", "get_time", {})]),
        tool_result("k2", "09:30"),
        asst("Done: hello.py written; it is 09:30.", reasoning="Both done."),
        user("Thanks! Now delete it.")], "tools": [WRITE_FILE, NO_ARGS], "reasoning_effort": "max"}),
    ("agent_loop_chat_mode_with_content_and_calls", {"messages": [
        user("Find news and weather."),
        asst("Let me look that up.", calls=[call("m1", "web_search", {"query": "news", "max_results": 3}),
                                            call("m2", "get_weather", {"city": "Berlin"})]),
        tool_result("m1", "headline 1\nheadline 2"), tool_result("m2", "Berlin: 9°C"),
        asst("Here is what I found."), user("More detail on headline 1.")],
        "tools": [SEARCH, WEATHER], "thinking": DISABLED}),
    ("tool_history_without_tools_list_drops_thinking", {"messages": [
        user("Weather?"),
        asst("", reasoning="call it", calls=[call("h1", "get_weather", {"city": "Rome"})]),
        tool_result("h1", "Rome: 25°C"),
        asst("Rome is at 25°C.", reasoning="answer"),
        user("And Milan?"),
        asst("", reasoning="call again", calls=[call("h2", "get_weather", {"city": "Milan"})]),
        tool_result("h2", "Milan: 21°C")]}),
    ("assistant_ends_with_tool_call", {"messages": [
        user("Weather in Lima?"),
        asst("", reasoning="Call the tool.", calls=[call("l1", "get_weather", {"city": "Lima", "unit": "celsius"})])],
        "tools": [WEATHER]}),
]


# ----------------------------------------------------------------------------------------------
# Parser cases: completions beyond the encoded assistant turns. "frank": "error" marks text
# DeepSeek's parser accepts but frank rejects (documented in docs/chat.md).
# ----------------------------------------------------------------------------------------------

EOS = "<｜end▁of▁sentence｜>"
D = "｜DSML｜"


def block(*invokes: str) -> str:
    return f"\n\n<{D}tool_calls>\n" + "\n".join(invokes) + f"\n</{D}tool_calls>"


def invoke(name: str, *params: str) -> str:
    return f'<{D}invoke name="{name}">\n' + "\n".join(params) + f"\n</{D}invoke>"


def param(name: str, value: str, is_string: bool) -> str:
    return f'<{D}parameter name="{name}" string="{"true" if is_string else "false"}">{value}</{D}parameter>'


PARSER_CASES: list[tuple[str, str, str, str]] = [
    # (name, thinking_mode, text, frank)
    ("thinking_content_only", "thinking", "Simple arithmetic.</think>2 + 2 = 4." + EOS, "same"),
    ("chat_content_only", "chat", "Hello there!" + EOS, "same"),
    ("thinking_empty_everything", "thinking", "</think>" + EOS, "same"),
    ("chat_empty", "chat", EOS, "same"),
    ("content_with_newlines_and_lt", "chat", "a < b\n\n<not dsml>\n\nend" + EOS, "same"),
    ("value_contains_other_dsml_tags", "chat",
     block(invoke("f", param("x", f"<{D}invoke name=\"g\"> inside", True))) + EOS, "same"),
    ("value_with_eos_text", "chat", block(invoke("f", param("x", "a" + EOS + "b", True))) + EOS, "same"),
    ("name_with_leading_whitespace", "chat",
     f"\n\n<{D}tool_calls>\n<{D}invoke \t name=\"f\">\n\n</{D}invoke>\n</{D}tool_calls>" + EOS, "same"),
    ("empty_block", "chat", f"\n\n<{D}tool_calls>\n</{D}tool_calls>" + EOS, "same"),
    ("no_eos_after_block", "chat", block(invoke("f")), "same"),
    ("non_string_values_verbatim", "thinking",
     "r</think>" + block(invoke("f", param("a", '{"k":[1,2]}', False), param("b", " 7 ", False),
                                 param("c", "null", False))) + EOS, "same"),
    ("parameter_key_with_quote", "chat", block(invoke("f", param('we"ird', "v", True))) + EOS, "same"),
    ("missing_think_end", "thinking", "reasoning without end" + EOS, "same"),
    ("think_in_content", "chat", "text <think> more" + EOS, "same"),
    ("dsml_in_content", "chat", f"see {D} here" + EOS, "same"),
    ("single_newline_before_block", "chat", f"x\n<{D}tool_calls>\n</{D}tool_calls>" + EOS, "same"),
    ("text_after_block", "chat", block(invoke("f")) + "extra" + EOS, "same"),
    ("text_after_eos", "chat", "done" + EOS + "more", "same"),
    ("duplicate_parameter", "chat", block(invoke("f", param("a", "1", False), param("a", "2", False))) + EOS, "same"),
    ("bad_string_attribute", "chat",
     block(invoke("f", f'<{D}parameter name="a" string="yes">1</{D}parameter>')) + EOS, "same"),
    ("bare_parameter_close", "chat",
     block(invoke("f", f'<{D}parameter name="a" string="true">x/{D}parameter>')) + EOS, "same"),
    ("block_header_garbage", "chat", f"\n\n<{D}tool_calls>junk\n<{D}invoke name=\"f\">\n\n</{D}invoke>\n</{D}tool_calls>" + EOS, "same"),
    ("tool_calls_inside_reasoning", "thinking", "r" + block(invoke("f")) + EOS, "same"),
    ("invalid_json_value", "chat", block(invoke("f", param("a", "{not json", False))) + EOS, "error"),
    ("nan_value", "chat", block(invoke("f", param("a", "NaN", False))) + EOS, "error"),
    ("empty_non_string_value", "chat", block(invoke("f", param("a", "", False))) + EOS, "error"),
    ("empty_tool_name", "chat", block(invoke("")) + EOS, "error"),
    ("integer_beyond_64_bits", "chat", block(invoke("f", param("n", "123456789012345678901234", False))) + EOS, "error"),
    ("newline_before_parameter_close", "chat",
     block(invoke("f", f'<{D}parameter name="a" string="true">x<\n/{D}parameter>')) + EOS, "error"),
]


# ----------------------------------------------------------------------------------------------


def load_encoder(path: str):
    data = Path(path).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != ENCODER_SHA256:
        sys.exit(f"{path}: sha256 {digest} is not the pinned {ENCODER_SHA256}; use get_dsv4_encoder.py")
    spec = importlib.util.spec_from_file_location("encoding_dsv4", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def encode(enc, request: dict) -> str:
    args = encoder_call(request)
    return enc.encode_messages(copy.deepcopy(args["messages"]), thinking_mode=args["thinking_mode"],
                               reasoning_effort=args["reasoning_effort"])


def reference_parse(enc, text: str, thinking_mode: str) -> dict:
    try:
        return enc.parse_message_from_completion_text(text, thinking_mode=thinking_mode)
    except (AssertionError, ValueError) as error:
        return {"error": f"{type(error).__name__}: {error}"}


def completions(enc, request: dict) -> list[dict]:
    """What the model generates for each assistant message that answers a user or tool turn:
    the prompt with that message minus the prompt that stops before it."""
    out = []
    thinking_mode = encoder_call(request)["thinking_mode"]
    for k, message in enumerate(request["messages"]):
        if message["role"] != "assistant" or k == 0 or request["messages"][k - 1]["role"] not in ("user", "tool"):
            continue
        before = encode(enc, {**request, "messages": request["messages"][:k]})
        with_turn = encode(enc, {**request, "messages": request["messages"][:k + 1]})
        assert with_turn.startswith(before), f"turn {k}: the prompt is not a prefix"
        text = with_turn[len(before):]
        reference = reference_parse(enc, text, thinking_mode)
        assert "error" not in reference, f"turn {k}: DeepSeek cannot parse its own encoding: {reference}"
        out.append({"message_index": k, "thinking_mode": thinking_mode, "text": text,
                    "reference": reference, "original": message})
    return out


def token_ids(tokenizer: tokenizers.Tokenizer, prompt: str) -> list[int]:
    ids = tokenizer.encode(prompt, add_special_tokens=False).ids
    assert tokenizer.encode(prompt, add_special_tokens=True).ids == ids, "the tokenizer adds special tokens"
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoder", required=True, help="encoding_dsv4.py checked by get_dsv4_encoder.py")
    parser.add_argument("--tokenizer", required=True, help="DeepSeek-V4's tokenizer.json")
    parser.add_argument("--out", required=True, help="folder for the .jsonl fixtures")
    args = parser.parse_args()
    if tokenizers.__version__ != REQUIRED_TOKENIZERS:
        sys.exit(f"needs tokenizers {REQUIRED_TOKENIZERS}, found {tokenizers.__version__}")
    enc = load_encoder(args.encoder)
    tokenizer = tokenizers.Tokenizer.from_file(args.tokenizer)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    names = [name for name, _ in CONVERSATIONS] + [name for name, *_ in PARSER_CASES]
    assert len(names) == len(set(names)), "duplicate fixture names"

    n_completions = 0
    with open(out / "dsv4_conversations.jsonl", "w", encoding="utf-8", newline="\n") as f:
        for name, request in CONVERSATIONS:
            request = json.loads(json.dumps(request, ensure_ascii=False))  # exactly what the file holds
            prompt = encode(enc, request)
            record = {"name": name, "request": request, "encoder_call": encoder_call(request),
                      "prompt": prompt, "ids": token_ids(tokenizer, prompt), "completions": completions(enc, request)}
            n_completions += len(record["completions"])
            f.write(json.dumps(record, ensure_ascii=False) + "\n")

    with open(out / "dsv4_parser_cases.jsonl", "w", encoding="utf-8", newline="\n") as f:
        for name, thinking_mode, text, frank in PARSER_CASES:
            record = {"name": name, "thinking_mode": thinking_mode, "text": text,
                      "reference": reference_parse(enc, text, thinking_mode), "frank": frank}
            f.write(json.dumps(record, ensure_ascii=False) + "\n")

    print(f"{len(CONVERSATIONS)} conversations, {n_completions} completions, {len(PARSER_CASES)} parser cases "
          f"-> {out} (encoder sha256 {ENCODER_SHA256})")


if __name__ == "__main__":
    main()
