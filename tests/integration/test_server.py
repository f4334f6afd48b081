"""frank serve driven by the official OpenAI client and by raw HTTP."""
import json
import os
import random
import socket
import threading
import time

import openai
import pytest
import requests

from conftest import metrics, start_server, total


def client(server, **kw):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=kw.pop("api_key", "unused"), max_retries=0, **kw)


def test_health_and_models(server):
    assert server.get("/health").json() == {"status": "ok"}
    models = client(server).models.list()
    assert len(models.data) == 1 and models.data[0].id.startswith("frank")


def test_chat_non_streaming(server):
    r = client(server).chat.completions.create(
        model="frank", messages=[{"role": "user", "content": "Hello!"}], max_tokens=8, temperature=0)
    choice = r.choices[0]
    assert choice.message.role == "assistant"
    assert choice.finish_reason in ("stop", "length")
    assert r.usage.completion_tokens <= 8 and r.usage.prompt_tokens > 3
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_streaming_with_usage(server):
    stream = client(server).chat.completions.create(
        model="frank", messages=[{"role": "user", "content": "Count to three."}], max_tokens=6, temperature=0,
        stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finishes) == 1
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens <= 6
    assert chunks[-1].usage.prompt_tokens_details.cached_tokens >= 0
    # The same request without streaming gives the same text (greedy).
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    again = client(server).chat.completions.create(
        model="frank", messages=[{"role": "user", "content": "Count to three."}], max_tokens=6, temperature=0)
    assert again.choices[0].message.content == text


def test_completions_with_logprobs_and_echo(server):
    r = client(server).completions.create(model="frank", prompt="The quick brown fox", max_tokens=4, temperature=0,
                                          logprobs=3, echo=True)
    lp = r.choices[0].logprobs
    assert r.choices[0].text.startswith("The quick brown fox")
    generated = r.usage.completion_tokens
    assert len(lp.token_logprobs) == r.usage.prompt_tokens + generated
    assert all(v is None for v in lp.token_logprobs[:r.usage.prompt_tokens])
    # Offsets point into the returned text: the added BOS at 0, then each token where its text starts.
    text = r.choices[0].text
    assert lp.text_offset[0] == 0 and lp.text_offset[1] == 0
    for token, offset in zip(lp.tokens[1:r.usage.prompt_tokens], lp.text_offset[1:r.usage.prompt_tokens]):
        assert text[offset:offset + len(token)] == token, (token, offset)
    for value, top in zip(lp.token_logprobs[-generated:], lp.top_logprobs[-generated:]):
        assert value <= 0 and len(top) == 3
        assert max(top.values()) >= value - 1e-6  # greedy: the chosen token is the best one


def test_completions_token_ids_and_forced_decoding(server):
    forced = [100, 200, 300, 400]
    r = server.post("/v1/completions", json={"prompt": [0, 5, 6, 7], "max_tokens": 50,
                                             "forced_completion_ids": forced, "logprobs": 0}).json()
    assert r["usage"]["completion_tokens"] == len(forced)
    text = server.post("/detokenize", json={"tokens": forced}).json()["prompt"]
    assert r["choices"][0]["text"] == text
    assert r["choices"][0]["finish_reason"] == "stop"


def test_stop_sequence_is_not_returned(server):
    forced = server.post("/tokenize", json={"prompt": "alpha beta gamma delta", "add_special_tokens": False}).json()
    r = server.post("/v1/completions", json={"prompt": "x", "forced_completion_ids": forced["tokens"],
                                             "stop": [" gamma"]}).json()
    assert r["choices"][0]["text"] == "alpha beta"
    assert r["choices"][0]["finish_reason"] == "stop"


def test_tokenize_round_trip(server):
    ids = server.post("/tokenize", json={"prompt": "def f(x):\n    return x  # 汉字 🙂"}).json()
    assert ids["count"] == len(ids["tokens"]) and ids["tokens"][0] == 0  # BOS
    back = server.post("/detokenize", json={"tokens": ids["tokens"][1:]}).json()["prompt"]
    assert back == "def f(x):\n    return x  # 汉字 🙂"


@pytest.mark.parametrize("body,status", [
    (b"{not json", 400),
    (b"[1, 2]", 400),
    (b"{\"prompt\": \"x\", \"max_tokens\": -1}", 400),
    (b"{\"prompt\": \"x\", \"temperature\": \"hot\"}", 400),
    (b"{\"prompt\": [1, 99999999]}", 400),
    (b"{\"prompt\": \"x\", \"n\": 2}", 400),
    (b"{}", 400),
    (b"[" * 100000 + b"]" * 100000, 400),
    (b"{\"prompt\": \"" + b"\xff\xfe" * 10 + b"\"}", 400),
])
def test_bad_requests_get_openai_errors(server, body, status):
    r = server.post("/v1/completions", data=body, headers={"Content-Type": "application/json"})
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["message"] and err["type"] == "invalid_request_error"
    assert server.get("/health").status_code == 200


def test_body_too_large_and_unknown_route(server):
    r = server.post("/v1/completions", data=b"{\"prompt\": \"" + b"a" * (9 << 20) + b"\"}")
    assert r.status_code == 413 and "error" in r.json()
    r = server.get("/v1/nothing")
    assert r.status_code == 404 and "error" in r.json()


def test_prompt_longer_than_context():
    s = start_server("--ctx", "32")
    try:
        r = s.post("/v1/completions", json={"prompt": list(range(10, 50))})
        assert r.status_code == 422 and r.json()["error"]["code"] == "context_length_exceeded"
    finally:
        s.stop()


def test_api_key():
    s = start_server("--api-key", "sekrit")
    try:
        assert s.get("/health").status_code == 200
        assert s.get("/v1/models").status_code == 401
        with pytest.raises(openai.AuthenticationError):
            client(s, api_key="wrong").models.list()
        assert client(s, api_key="sekrit").models.list().data
    finally:
        s.stop()


def long_request(s, tokens=400, stream=False):
    return s.post("/v1/completions", json={"prompt": [0, 1, 2], "max_tokens": tokens, "ignore_eos": True,
                                           "temperature": 0, "stream": stream}, stream=stream)


def test_queue_full_gets_429():
    s = start_server("--max-queue", "1")
    try:
        results = []
        threads = [threading.Thread(target=lambda: results.append(long_request(s, 120).status_code))
                   for _ in range(4)]
        for t in threads:
            t.start()
            time.sleep(0.2)
        for t in threads:
            t.join()
        assert sorted(results) == [200, 200, 429, 429], results
        assert total(metrics(s), "frank_requests_total", outcome="rejected") == 2
    finally:
        s.stop()


def test_disconnect_cancels_and_next_request_starts_promptly(server):
    before = total(metrics(server), "frank_requests_total", outcome="cancelled")
    r = long_request(server, tokens=100000, stream=True)
    it = r.iter_lines()
    next(it)
    r.close()  # the client goes away mid-stream
    start = time.time()
    ok = server.post("/v1/completions", json={"prompt": [0, 1], "max_tokens": 2, "temperature": 0})
    assert ok.status_code == 200
    assert time.time() - start < 10, "the cancelled request kept the engine busy"
    assert total(metrics(server), "frank_requests_total", outcome="cancelled") == before + 1


def test_non_streaming_disconnect_cancels(server):
    before = total(metrics(server), "frank_requests_total", outcome="cancelled")
    sock = socket.create_connection((server.url.split("//")[1].split(":")[0], int(server.url.rsplit(":", 1)[1])))
    body = json.dumps({"prompt": [0, 1, 2], "max_tokens": 100000, "ignore_eos": True}).encode()
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    time.sleep(0.5)
    sock.close()
    deadline = time.time() + 10
    while time.time() < deadline and total(metrics(server), "frank_requests_total", outcome="cancelled") == before:
        time.sleep(0.1)
    assert total(metrics(server), "frank_requests_total", outcome="cancelled") == before + 1


def test_twenty_concurrent_clients_answered_once_in_arrival_order(server):
    finished = []
    lock = threading.Lock()

    def one(i):
        r = server.post("/v1/completions", json={"prompt": [0, 10 + i], "max_tokens": 3, "temperature": 0})
        assert r.status_code == 200
        with lock:
            finished.append((i, r.json()["id"]))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
        time.sleep(0.05)
    for t in threads:
        t.join()
    assert [i for i, _ in finished] == list(range(20))
    assert len({rid for _, rid in finished}) == 20


def test_metrics_are_consistent_with_usage():
    s = start_server()
    try:
        usage = []
        for i in range(3):
            r = s.post("/v1/completions", json={"prompt": [0, 3, 4 + i], "max_tokens": 2 + i, "temperature": 0,
                                                "ignore_eos": True}).json()
            usage.append(r["usage"])
        m = metrics(s)
        assert total(m, "frank_requests_total") == 3
        assert total(m, "frank_prompt_tokens_total") == sum(u["prompt_tokens"] for u in usage)
        assert total(m, "frank_generated_tokens_total") == sum(u["completion_tokens"] for u in usage)
        assert total(m, "frank_time_to_first_token_seconds_count") == 3
        assert total(m, "frank_model_info") == 1
    finally:
        s.stop()


def test_prefix_cache_next_turn_reuses_the_conversation(server):
    c = client(server)
    messages = [{"role": "system", "content": "You are terse. " * 40},
                {"role": "user", "content": "Describe a robot in one line."}]
    first = c.chat.completions.create(model="frank", messages=messages, max_tokens=4, temperature=0,
                                      extra_body={"thinking": {"type": "disabled"}})
    # Earlier tests' conversations share at most the first tokens (BOS) with this one.
    assert first.usage.prompt_tokens_details.cached_tokens < 4
    messages += [{"role": "assistant", "content": "A robot."}, {"role": "user", "content": "And a cat?"}]
    second = c.chat.completions.create(model="frank", messages=messages, max_tokens=4, temperature=0,
                                       extra_body={"thinking": {"type": "disabled"}})
    # Everything up to the first turn's <｜Assistant｜> comes from the cache.
    assert second.usage.prompt_tokens_details.cached_tokens >= first.usage.prompt_tokens - 2
    m = metrics(server)
    assert total(m, "frank_prompt_tokens_cached_total") >= second.usage.prompt_tokens_details.cached_tokens
    assert total(m, "frank_time_to_first_token_seconds_count", cache="warm") >= 1
    assert total(m, "frank_prefix_checkpoints_total") >= 2


def tool_call_case():
    """A DSML tool-call turn DeepSeek's encoder wrote, with the calls its parser reads from it."""
    path = os.path.join(os.path.dirname(__file__), "..", "fixtures", "chat", "dsv4_conversations.jsonl")
    for line in open(path, encoding="utf-8"):
        case = json.loads(line)
        for c in case["completions"]:
            if c["reference"]["tool_calls"] and c["thinking_mode"] == "chat":
                request = {"messages": case["request"]["messages"][:c["message_index"]],
                           "tools": case["request"]["tools"], "thinking": {"type": "disabled"}}
                return request, c["text"], c["reference"]["tool_calls"]
    raise AssertionError("no tool-call completion in the chat fixtures")


@pytest.mark.parametrize("stream", [False, True])
def test_tool_call_round_trip_through_forced_decoding(server, stream):
    request, text, want = tool_call_case()
    forced = server.post("/tokenize", json={"prompt": text, "add_special_tokens": False}).json()["tokens"]
    c = client(server)
    kwargs = dict(model="frank", messages=request["messages"], tools=request["tools"], max_tokens=len(forced),
                  extra_body={"thinking": request["thinking"], "forced_completion_ids": forced})
    if not stream:
        r = c.chat.completions.create(**kwargs)
        calls, reason = r.choices[0].message.tool_calls, r.choices[0].finish_reason
        got = [(t.function.name, json.loads(t.function.arguments)) for t in calls]
        assert len({t.id for t in calls}) == len(calls)
    else:
        parts, reason = {}, None
        for chunk in c.chat.completions.create(stream=True, **kwargs):
            for d in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
                entry = parts.setdefault(d.index, {"name": "", "arguments": ""})
                entry["name"] += d.function.name or "" if d.function else ""
                entry["arguments"] += (d.function.arguments or "") if d.function else ""
            if chunk.choices and chunk.choices[0].finish_reason:
                reason = chunk.choices[0].finish_reason
        got = [(parts[i]["name"], json.loads(parts[i]["arguments"])) for i in sorted(parts)]
    assert got == [(t["function"]["name"], json.loads(t["function"]["arguments"])) for t in want]
    assert reason == "tool_calls"


def test_random_request_bodies_never_break_the_server():
    """A bounded fuzz of the request parser: mutated chat and completion bodies (a short context
    keeps any request that survives mutation short)."""
    server = start_server("--ctx", "64")
    try:
        fuzz_requests(server)
    finally:
        server.stop()


def fuzz_requests(server):
    rng = random.Random(1234)
    seeds = [json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
             json.dumps({"prompt": [0, 1, 2], "max_tokens": 2, "logprobs": 1, "stop": ["x"]})]
    statuses = set()
    for i in range(150):
        body = bytearray(rng.choice(seeds).encode())
        for _ in range(rng.randint(1, 6)):
            op = rng.randrange(3)
            pos = rng.randrange(len(body))
            if op == 0:
                body[pos] = rng.randrange(256)
            elif op == 1:
                del body[pos:pos + rng.randint(1, 8)]
            else:
                body[pos:pos] = rng.choice([b"{", b"[", b"\"", b"-1", b"1e999", b"null", b"\xff", b"}"])
        path = "/v1/chat/completions" if b"messages" in body else "/v1/completions"
        r = server.post(path, data=bytes(body), headers={"Content-Type": "application/json"})
        statuses.add(r.status_code)
        assert r.status_code in (200, 400, 422), (r.status_code, bytes(body), r.text)
        assert r.status_code == 200 or "error" in r.json()
    assert server.get("/health").status_code == 200
    assert 400 in statuses
