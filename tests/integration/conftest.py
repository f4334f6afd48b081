"""Starts `frank serve` on the embedded default model for the integration tests."""
import os
import re
import subprocess
import threading
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families
import requests

FRANK = os.environ.get("FRANK_BINARY", os.path.join(os.path.dirname(__file__), "..", "..", "build", "frank"))


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([FRANK, "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.url = None
        deadline = time.time() + 120
        lines = []
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"on (http://[\d.]+:\d+)", line)
            if m:
                self.url = m.group(1)
                break
        if self.url is None:
            self.proc.kill()
            raise RuntimeError("frank serve did not start:\n" + "".join(lines))
        # Keep reading the server's output so it never blocks on a full pipe; tests may inspect it.
        self.output = lines
        threading.Thread(target=lambda: self.output.extend(self.proc.stdout), daemon=True).start()

    def get(self, path, **kw):
        return requests.get(self.url + path, timeout=60, **kw)

    def post(self, path, **kw):
        return requests.post(self.url + path, timeout=120, **kw)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        assert self.proc.returncode in (0, -15), \
            f"server exited with {self.proc.returncode}:\n" + "".join(self.output[-40:])


@pytest.fixture(scope="module")
def server():
    s = Server("--max-queue", "32", "--ctx", "4096")
    yield s
    s.stop()


def start_server(*args):
    return Server(*args)


def metrics(server):
    """{(name, frozenset(labels)): value} from /metrics, through Prometheus' own parser."""
    out = {}
    for family in text_string_to_metric_families(server.get("/metrics").text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def total(m, name, **labels):
    return sum(v for (n, ls), v in m.items() if n == name and set(labels.items()) <= set(ls))
