"""The command line's question time with and without the home's server, quiet and loaded, in one run.

1. Builds the packaged demo chats in a temporary NM_HOME (``narrative-mirror build``).
2. With ``serve --background`` running: per question, the server's own answer time (``POST
   /api/ask`` on loopback, its wall time here) and a CLI ``ask --json`` (a fresh process, as a
   person runs it; it goes through the command socket), interleaved; the JSON of both compared
   (without ``event_id``, ``timings_ms`` and the command line's empty ``failures`` / ``problems``).
3. ``serve stop``; then the CLI ``ask`` in its own process against a bare embedder load (a fresh
   process that imports the embedder and encodes one text), interleaved.

Each part runs first on the machine as it is ("quiet", its load average printed), then with
``--load`` busy processes started here ("loaded"). Targets (issue #42): through the server, CLI p95
<= 2x the server's p95 + 0.5 s; without one, CLI median <= 1.3x the bare embedder load's.

    PYTHONPATH=. .venv/bin/python benchmarks/cli_through_server.py [--questions 6] [--load 2]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from loopback import free_port  # noqa: E402

from narrative_mirror import settings  # noqa: E402
from resources import environment  # noqa: E402

QUESTIONS = [
    ("demo_marathon_Ines_Kofi", "When is the Lisbon half marathon?"),
    ("demo_garden_Mara_Theo", "Where did the wood for the raised beds come from?"),
    ("demo_harbor_Lena_Sam", "When was Lena's dad's hip operation?"),
    ("demo_garden_Mara_Theo", "How did Theo's sprained ankle develop?"),
    ("demo_marathon_Ines_Kofi", "Where does the race start?"),
    ("demo_harbor_Lena_Sam", "What did Sam cook?"),
]
BARE_LOAD = "from narrative_mirror.embedding import Embedder; Embedder().encode(['one text'])"


def _spin() -> None:
    while True:
        pass


def _cli(env: dict, *argv: str) -> tuple[float, int, dict]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "cli.main", *argv, "--json"], env=env, capture_output=True, text=True, timeout=900
    )
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr[-2000:]}")
    return seconds, done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}


def _api_ask(port: int, chat: str, question: str) -> tuple[float, dict]:
    body = json.dumps({"chat": chat, "question": question}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/ask", data=body, headers={"content-type": "application/json"}
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=300) as response:
        answer = json.loads(response.read())
    return time.perf_counter() - started, answer


def _wait_for_http(port: int, limit_s: float = 300.0) -> None:
    """``serve --background`` returns once its command socket answers; the HTTP port may follow."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _bare_load(env: dict) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", BARE_LOAD], env=env, check=True, capture_output=True, timeout=600)
    return time.perf_counter() - started


def _comparable(answer: dict) -> dict:
    """The answer without what differs per run (its event id, timings) and the command line's
    envelope (``failures`` and ``problems``, empty lists on a good answer)."""
    dropped = ("event_id", "timings_ms", "failures", "problems")
    return {k: v for k, v in answer.items() if k not in dropped}


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def through_server(env: dict, port: int, rounds: int) -> dict:
    server, cli, same = [], [], 0
    for _ in range(rounds):
        for chat, question in QUESTIONS:
            api_s, api_answer = _api_ask(port, chat, question)
            cli_s, _, cli_answer = _cli(env, "ask", "--chat", chat, question)
            server.append(api_s)
            cli.append(cli_s)
            same += _comparable(api_answer) == _comparable(cli_answer)
    return {
        "asks": len(cli),
        "server_p50_s": round(statistics.median(server), 3),
        "server_p95_s": round(_p(server, 0.95), 3),
        "cli_p50_s": round(statistics.median(cli), 3),
        "cli_p95_s": round(_p(cli, 0.95), 3),
        "target_s": round(2 * _p(server, 0.95) + 0.5, 3),
        "met": _p(cli, 0.95) <= 2 * _p(server, 0.95) + 0.5,
        "same_json": f"{same}/{len(cli)}",
    }


def without_server(env: dict, rounds: int) -> dict:
    cli, bare = [], []
    for round_ in range(rounds):
        chat, question = QUESTIONS[round_ % len(QUESTIONS)]
        cli.append(_cli(env, "ask", "--chat", chat, question)[0])
        bare.append(_bare_load(env))
    ratio = statistics.median(cli) / statistics.median(bare)
    return {
        "asks": len(cli),
        "cli_p50_s": round(statistics.median(cli), 2),
        "bare_embedder_p50_s": round(statistics.median(bare), 2),
        "ratio": round(ratio, 2),
        "met": ratio <= 1.3,
    }


def measure(env: dict, rounds: int, local_rounds: int) -> dict:
    port = free_port()
    started = _cli(env, "serve", "--background", "--port", str(port))
    if started[1] != 0:
        raise RuntimeError(f"serve --background exited {started[1]}")
    try:
        _wait_for_http(port)
        served = through_server(env, port, rounds)
    finally:
        _cli(env, "serve", "stop")
    return {
        "load_average_before": os.getloadavg()[0],
        "with_server": served,
        "without": without_server(env, local_rounds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="passes over the questions through the server")
    parser.add_argument("--local-rounds", type=int, default=5, help="CLI asks without a server (and bare loads)")
    parser.add_argument("--load", type=int, default=2, help="busy processes for the loaded part")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nm-cli-server-") as tmp:
        data = Path(tmp) / "data"
        shutil.copytree(settings.DEMO_DATA_DIR, data)
        env = environment.child_env(
            NM_HOME=str(Path(tmp) / "home"),
            NM_DATA_DIR=str(data),
            PYTHONPATH=str(REPO),
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
        )
        began = time.perf_counter()
        subprocess.run([sys.executable, "-m", "cli.main", "build"], env=env, check=True, capture_output=True)
        result = {
            "build_s": round(time.perf_counter() - began, 1),
            "quiet": measure(env, args.rounds, args.local_rounds),
        }
        spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(args.load)]
        for spinner in spinners:
            spinner.start()
        try:
            time.sleep(5)
            result["loaded"] = {"busy_processes": args.load, **measure(env, args.rounds, args.local_rounds)}
        finally:
            for spinner in spinners:
                spinner.kill()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
