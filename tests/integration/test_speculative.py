"""Speculative decoding in `frank serve`: the embedded tiny model with an MTP block
(`--synthetic tiny-chat-mtp`, random weights, so drafts are mostly rejected) drafting 3 tokens per
verify step must answer exactly as the same server without drafting, log-probabilities included,
and count its verify steps and drafts in /metrics."""
import pytest
from conftest import metrics, start_server, total


@pytest.fixture(scope="module")
def servers():
    drafting = start_server("--synthetic", "tiny-chat-mtp", "--draft-tokens", "3", "--ctx", "2048")
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


def test_sampled_drafting_is_reproducible(servers):
    drafting, _ = servers
    body = {"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0.8, "seed": 11, "ignore_eos": True}
    first = drafting.post("/v1/completions", json=body).json()["choices"][0]["text"]
    second = drafting.post("/v1/completions", json=body).json()["choices"][0]["text"]
    assert first == second
