"""What freshness costs a user, measured on a copy of the demo chats in a fresh NM_HOME.

- question path: wall time of a whole `narrative-mirror ask` process on a built chat, against a
  process that only loads the embedder and encodes one question (the floor for any answer);
  the two alternate, ``--repeats`` times each, and the medians are compared;
- an edit (one message changed, two appended): `build --json` reports what it re-encoded and
  re-ran, timed against the first build and a no-op build; a second edit is picked up by the
  next `ask`, which rebuilds through Dagster before answering.

    .venv/bin/python benchmarks/freshness.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from resources import environment  # noqa: E402

BIN = Path(sys.executable).parent
CHAT = "demo_harbor_Lena_Sam"
QUESTION = "Where was Lena's dad operated on?"
EMBED_ONLY = f"from narrative_mirror.embedding import Embedder\nEmbedder().encode([{QUESTION!r}])\n"


def timed(command: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    proc = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - started, proc


def edit(path: Path, first_text: str) -> None:
    """Change the first message's text and append two messages."""
    chat = json.loads(path.read_text())
    chat["session_1"][0]["clean_text"] = first_text
    last = chat[max((k for k in chat if k.startswith("session_") and k[8:].isdigit()), key=lambda k: int(k[8:]))]
    for text in ("Lena sold the old red kayak to a fisherman", "He paid with a crate of smoked herring"):
        message = dict(last[-1], clean_text=text)
        message["dia_id"] = f"{message['dia_id'].split(':')[0]}:{len(last) + 1}"
        last.append(message)
    path.write_text(json.dumps(chat))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nm_freshness_"))
    shutil.copytree(REPO / "narrative_mirror" / "demo_data" / "chats", work / "chats")
    shutil.copytree(REPO / "narrative_mirror" / "demo_data" / "chats_arcs", work / "chats_arcs")
    env = environment.child_env(
        NM_HOME=str(work / "home"), NM_DATA_DIR=str(work / "chats"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"
    )
    cli = [str(BIN / "narrative-mirror")]

    first_build, proc = timed([*cli, "build", "--json"], env)
    messages = json.loads(proc.stdout)["messages"]
    noop_build, _ = timed([*cli, "build", "--json"], env)
    timed([*cli, "ask", "--chat", CHAT, QUESTION], env)  # warm the file cache for both sides

    ask_s, embed_s = [], []
    for _ in range(args.repeats):
        embed_s.append(timed([sys.executable, "-c", EMBED_ONLY], env)[0])
        ask_s.append(timed([*cli, "ask", "--chat", CHAT, QUESTION], env)[0])

    edit(work / "chats" / f"{CHAT}.json", "Evening! Guess what: I bought a tandem bicycle today")
    edit_build, proc = timed([*cli, "build", "--json"], env)
    after_edit = json.loads(proc.stdout)
    edit(work / "chats" / f"{CHAT}.json", "Evening! The tandem went back to the shop")
    ask_after_edit, _ = timed([*cli, "ask", "--chat", CHAT, QUESTION], env)

    report = {
        "question_path": {
            "ask_process_s": [round(s, 2) for s in ask_s],
            "embed_only_process_s": [round(s, 2) for s in embed_s],
            "median_ask_s": round(statistics.median(ask_s), 2),
            "median_embed_only_s": round(statistics.median(embed_s), 2),
            "ask_vs_embed_only": round(statistics.median(ask_s) / statistics.median(embed_s), 3),
            "ask_right_after_an_edit_s": round(ask_after_edit, 2),
        },
        "edit": {
            "messages_in_demo": messages,
            "encoded_messages": after_edit["encoded_messages"],
            "per_file": {
                k: {"encoded_messages": v["encoded_messages"], "ran": v["ran"]}
                for k, v in after_edit["per_file"].items()
            },
            "first_build_s": round(first_build, 2),
            "noop_build_s": round(noop_build, 2),
            "build_after_edit_s": round(edit_build, 2),
        },
    }
    print(json.dumps(report, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
