"""`frank lab draw | run | fidelity` against real `frank serve` engines on the embedded tiny model.

The A/B test's treatment arm is the same server with `--debug-step-delay-ms`: every forward step
sleeps, so it is slower by construction and a 3-block design must reach "reject". The fidelity
screen's perturbed arm adds `--debug-logit-noise`: the screen must pass A against itself and catch B.
"""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import FRANK

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "lab")
WORKLOAD = os.path.abspath(os.path.join(FIXTURES, "workload-tiny.jsonl"))
SERVE = f"exec {FRANK} serve --port {{port}} --ctx 2048"


def frank(*args, check=True, timeout=600):
    result = subprocess.run([FRANK, *args], capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"frank {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


def write_design(tmp_path, blocks=3, draws=1, treatment_start=None):
    design = {
        "format": "frank-lab-design/1",
        "name": "delay-flag",
        "arms": [
            {"name": "plain", "start": SERVE, "url": "http://127.0.0.1:{port}", "health": "/health"},
            {"name": "delayed", "start": treatment_start or SERVE + " --debug-step-delay-ms 40",
             "url": "http://127.0.0.1:{port}", "health": "/health"},
        ],
        "baseline": "plain",
        "blocks": blocks,
        "draws_per_start": draws,
        "workload": {"name": "tiny", "path": WORKLOAD},
        "metric": {"name": "task_time_s", "better": "lower"},
        "decision": {"kind": "all_blocks_better"},
        "quality_guards": [{"metric": "passed", "better": "higher", "scale": "absolute", "margin": 0.1}],
    }
    path = tmp_path / "design.json"
    path.write_text(json.dumps(design))
    return path


def ledger_lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_draw_reports_the_time_breakdown(server, tmp_path):
    out = tmp_path / "draw.json"
    result = frank("lab", "draw", "--server", server.url, "--workload", WORKLOAD, "--out", str(out))
    print(result.stdout)
    assert "time breakdown:" in result.stdout and "worth: 1 ms off each of the" in result.stdout
    draw = json.loads(out.read_text())
    m = draw["metrics"]
    parts = m["decode_s"] + m["cold_ttft_s"] + m["warm_ttft_s"] + m["tool_s"] + m["outside_s"]
    assert abs(parts - m["task_time_s"]) < 1e-6
    # 4 free tokens, then the 6 recorded ids forced; the grader finds the forced text in the transcript.
    assert m["output_tokens"] == 10 and m["requests"] == 2 and m["passed"] == 1
    # The second request repeats the first one's conversation: the prefix cache serves it warm.
    first, second = draw["requests"]
    assert first["cache"] == "cold" and second["cache"] == "warm" and second["cached_tokens"] > 0
    assert draw["server_counters"]["frank_generated_tokens_total"] == 10


def test_ab_design_with_a_delayed_arm_is_rejected(tmp_path):
    design = write_design(tmp_path)
    registered = frank("lab", "register", str(design))
    assert "design id" in registered.stdout.lower()
    ledger = tmp_path / "ledger.jsonl"
    run = frank("lab", "run", str(design), "--ledger", str(ledger))
    print(run.stdout)
    # The registration (id and smallest reachable p) is printed before the first engine starts.
    assert run.stdout.index(registered.stdout.splitlines()[0]) < run.stdout.index("starting")
    lines = ledger_lines(ledger)
    draws = [l for l in lines if l["kind"] == "draw"]
    assert len(draws) == 6 and all(l["metrics"]["passed"] == 1 for l in draws)
    assert [l["event"] for l in lines if l["kind"] == "event"].count("engine_started") == 6
    out = tmp_path / "analysis.json"
    analysis = frank("lab", "analyze", "--design", str(design), "--ledger", str(ledger), "--json", str(out))
    print(analysis.stdout)
    verdict = json.loads(out.read_text())
    assert verdict["verdict"] == "reject", verdict
    assert all(b["effect"] > 0 for b in verdict["blocks"])
    # A rerun finds nothing left to do and records no new draws.
    again = frank("lab", "run", str(design), "--ledger", str(ledger))
    assert "0 draws recorded now, 6 in the ledger" in again.stdout


def test_tampered_ledger_is_refused(tmp_path):
    design = write_design(tmp_path, blocks=2)
    ledger = tmp_path / "ledger.jsonl"
    frank("lab", "run", str(design), "--ledger", str(ledger))
    lines = ledger.read_text().splitlines()
    draw_at = next(i for i, l in enumerate(lines) if json.loads(l)["kind"] == "draw")
    edited = json.loads(lines[draw_at])
    edited["metrics"]["task_time_s"] /= 2  # a slower measurement made to look faster
    lines[draw_at] = json.dumps(edited, separators=(",", ":"))
    ledger.write_text("\n".join(lines) + "\n")
    result = frank("lab", "analyze", "--design", str(design), "--ledger", str(ledger), check=False)
    assert result.returncode != 0 and "hash chain is broken" in result.stderr, result.stderr
    result = frank("lab", "run", str(design), "--ledger", str(ledger), check=False)
    assert result.returncode != 0 and "hash chain is broken" in result.stderr, result.stderr


def test_crashed_arm_and_killed_runner_leave_a_valid_resumable_ledger(tmp_path):
    pid_file = tmp_path / "engine.pid"
    # The treatment arm writes its pid so the test can kill it in the middle of its start.
    treatment = f"echo $$ > {pid_file}; " + SERVE + " --debug-step-delay-ms 40"
    design = write_design(tmp_path, blocks=2, draws=3, treatment_start=treatment)
    ledger = tmp_path / "ledger.jsonl"
    runner = subprocess.Popen([FRANK, "lab", "run", str(design), "--ledger", str(ledger)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def wait_for(predicate, what, timeout=300):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate(ledger_lines(ledger)):
                return
            assert runner.poll() is None, f"the runner ended early:\n{runner.stdout.read()}"
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")

    # Kill the treatment engine once it has recorded its first draw: the start is cut short.
    wait_for(lambda ls: any(l["kind"] == "draw" and l["arm"] == "delayed" for l in ls), "a treatment draw")
    os.kill(int(pid_file.read_text()), signal.SIGKILL)
    wait_for(lambda ls: any(l.get("event") == "engine_crashed" for l in ls), "the crash to be recorded")
    # Then kill the runner itself while the next engine starts or draws.
    started = sum(1 for l in ledger_lines(ledger) if l.get("event") == "engine_started")
    wait_for(lambda ls: sum(1 for l in ls if l.get("event") == "engine_started") > started, "the next start")
    runner.send_signal(signal.SIGKILL)
    runner.wait()
    before = ledger_lines(ledger)
    crash = next(l for l in before if l.get("event") == "engine_crashed")

    resumed = frank("lab", "run", str(design), "--ledger", str(ledger))
    print(resumed.stdout)
    lines = ledger_lines(ledger)
    assert lines[:len(before)] == before, "resuming rewrote earlier lines"
    assert any(l.get("event") == "run_started" and l["resumed"] for l in lines)
    draws = {(l["block"], l["arm"], l["start"], l["draw"]) for l in lines if l["kind"] == "draw"}
    assert len(draws) == sum(1 for l in lines if l["kind"] == "draw"), "a draw was recorded twice"
    # The crashed start stays short (never retried into the data); every other start is complete.
    crashed_unit = (crash["block"], crash["arm"], crash["start"])
    for block in range(2):
        for arm in ("plain", "delayed"):
            n = sum(1 for d in draws if d[:3] == (block, arm, 0))
            assert n == (crash["draw"] if (block, arm, 0) == crashed_unit else 3), (block, arm, n)
    out = tmp_path / "analysis.json"
    frank("lab", "analyze", "--design", str(design), "--ledger", str(ledger), "--json", str(out))
    analysis = json.loads(out.read_text())
    assert analysis["verdict"] == "reject"
    assert any("do not have draws_per_start" in w for w in analysis["warnings"])


@pytest.mark.parametrize("noise,verdict", [(0.0, "pass"), (0.5, "differs")])
def test_fidelity_passes_a_against_itself_and_catches_a_perturbed_arm(tmp_path, noise, verdict):
    items = os.path.join(FIXTURES, "fidelity-items.jsonl")
    a = SERVE + " --max-logprobs 64"
    b = a + (f" --debug-logit-noise {noise}" if noise else "")
    out = tmp_path / "fidelity.json"
    result = frank("lab", "fidelity", "--a", a, "--b", b, "--items", items, "--json", str(out),
                   "--logs", str(tmp_path / "logs"))
    print(result.stdout)
    doc = json.loads(out.read_text())
    assert doc["verdict"] == verdict
    for group in doc["groups"]:
        # The CPU engine is deterministic: A against A is exactly the same distribution.
        assert group["aa"]["mean_kl"] == 0 and group["aa"]["top1_agreement"] == 1
        assert group["aa"]["positions"] in (6, 4)
        if noise:
            # The random tiny model spreads its mass over 129K tokens, so the top-64 KL proxy stays
            # small; top-1 agreement is what falls.
            assert group["ab"]["mean_kl"] > 0 and group["ab"]["top1_agreement"] < 1
        else:
            assert group["ab"]["mean_kl"] == 0 and group["ab"]["top1_agreement"] == 1
