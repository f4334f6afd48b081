"""Speculative decoding and routing traces in `frank serve`: the embedded tiny model with an MTP block
(`--synthetic tiny-chat-mtp`, random weights, so drafts are mostly rejected) drafting 3 tokens per
verify step must answer exactly as the same server without drafting, log-probabilities included,
and count its verify steps and drafts in /metrics. It also records its routing
(`--record-routing`), which `frank plan build` must accept."""
import struct
import subprocess

import pytest
from conftest import FRANK, metrics, start_server, total


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory):
    return tmp_path_factory.mktemp("routing") / "serve.trace"


@pytest.fixture(scope="module")
def servers(trace_path):
    drafting = start_server("--synthetic", "tiny-chat-mtp", "--draft-tokens", "3", "--ctx", "2048",
                            "--record-routing", str(trace_path))
    plain = start_server("--synthetic", "tiny-chat-mtp", "--draft-tokens", "0", "--ctx", "2048")
    yield drafting, plain
    drafting.stop()
    plain.stop()


@pytest.mark.parametrize("body", [
    {"prompt": "def fibonacci(n):", "max_tokens": 24, "temperature": 0, "ignore_eos": True, "logprobs": 3},
    {"prompt": [0, 5, 17, 3], "max_tokens": 9, "temperature": 0, "ignore_eos": True, "logprobs": 1},
])
def test_drafting_answers_exactly_as_without(servers, body):
    drafting, plain = servers
    a = drafting.post("/v1/completions", json=body).json()["choices"][0]
    b = plain.post("/v1/completions", json=body).json()["choices"][0]
    assert a["text"] == b["text"]
    assert a["logprobs"] == b["logprobs"]


def test_chat_stream_is_the_same_and_counters_move(servers):
    drafting, plain = servers
    body = {"messages": [{"role": "user", "content": "Count to five."}], "max_tokens": 20, "temperature": 0,
            "ignore_eos": True}
    before = metrics(drafting)
    a = drafting.post("/v1/chat/completions", json=body).json()
    b = plain.post("/v1/chat/completions", json=body).json()
    assert a["choices"][0]["message"] == b["choices"][0]["message"]
    assert a["usage"]["completion_tokens"] == 20
    after = metrics(drafting)
    delta = lambda name: total(after, name) - total(before, name)
    steps = delta("frank_verify_steps_total")
    assert 7 <= steps <= 20  # each step emits 1 + accepted tokens; near the limit it drafts less
    assert delta("frank_draft_tokens_total") >= steps
    assert delta("frank_tokens_per_verify_step_count") == steps
    assert total(metrics(plain), "frank_verify_steps_total") == 0


def test_auto_draft_length_answers_the_same():
    auto = start_server("--synthetic", "tiny-chat-mtp", "--draft-tokens", "auto", "--ctx", "2048")
    try:
        body = {"prompt": "def fibonacci(n):", "max_tokens": 24, "temperature": 0, "ignore_eos": True, "logprobs": 3}
        plain = start_server("--synthetic", "tiny-chat-mtp", "--draft-tokens", "0", "--ctx", "2048")
        try:
            want = plain.post("/v1/completions", json=body).json()["choices"][0]
        finally:
            plain.stop()
        got = auto.post("/v1/completions", json=body).json()["choices"][0]
        assert got["text"] == want["text"] and got["logprobs"] == want["logprobs"]
        m = metrics(auto)
        # It tried every length (0..4) before following its measurements.
        assert total(m, "frank_verify_step_draft_tokens_count") >= 5
    finally:
        auto.stop()


def test_context_limit_ends_both_at_the_same_token():
    drafting = start_server("--synthetic", "tiny-chat-mtp", "--draft-tokens", "4", "--ctx", "40")
    plain = start_server("--synthetic", "tiny-chat-mtp", "--draft-tokens", "0", "--ctx", "40")
    try:
        body = {"prompt": "A short prompt", "max_tokens": 60, "temperature": 0, "ignore_eos": True}
        a = drafting.post("/v1/completions", json=body).json()
        b = plain.post("/v1/completions", json=body).json()
        assert a["choices"][0]["text"] == b["choices"][0]["text"]
        assert a["usage"] == b["usage"]
        # The context (40 tokens) ended it, not max_tokens.
        assert b["choices"][0]["finish_reason"] == "length" and b["usage"]["total_tokens"] <= 41
        assert a["choices"][0]["finish_reason"] == "length"
    finally:
        drafting.stop()
        plain.stop()


def test_sampled_drafting_is_reproducible(servers):
    drafting, _ = servers
    body = {"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0.8, "seed": 11, "ignore_eos": True}
    first = drafting.post("/v1/completions", json=body).json()["choices"][0]["text"]
    second = drafting.post("/v1/completions", json=body).json()["choices"][0]["text"]
    assert first == second


def read_trace(path):
    """Steps by kind, and the header, per the byte layout of docs/routing-traces.md (independent of frank)."""
    data = path.read_bytes()
    assert data[:8] == b"FRKROUTE"
    version, flags, n_layers, n_experts, top_k, fp_len = struct.unpack_from("<6I", data, 8)
    at = 32 + fp_len
    kinds = []
    while at < len(data):
        marker, kind = struct.unpack_from("<4sI", data, at)
        assert marker == b"STEP"
        at += 8
        for _ in range(n_layers):
            (n_tokens,) = struct.unpack_from("<I", data, at)
            ids = struct.unpack_from(f"<{n_tokens * top_k}H", data, at + 4)
            assert all(i < n_experts for i in ids)
            at += 4 + 2 * n_tokens * top_k
        kinds.append(kind)
    return (version, flags, n_layers, n_experts, top_k), kinds


def test_recorded_routing_is_a_trace_plan_build_accepts(servers, trace_path, tmp_path):
    drafting, _ = servers
    drafting.post("/v1/completions", json={"prompt": "routing", "max_tokens": 6, "temperature": 0, "ignore_eos": True})
    header, kinds = read_trace(trace_path)
    assert header == (1, 0, 6, 8, 2)  # recorded (not synthetic), tiny model: 6 layers x 8 experts, top-2
    assert kinds.count(1) >= 1 and kinds.count(2) >= 1  # verify steps and prefill chunks
    plan = tmp_path / "plan.json"
    result = subprocess.run([FRANK, "plan", "build", "--traces", str(trace_path), "--cpu-experts", "12",
                             "--cache-slots", "4", "--out", str(plan)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert '"cpu_expert_count": 12' in plan.read_text()
