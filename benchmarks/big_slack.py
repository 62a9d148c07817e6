"""A big synthetic Slack export built through the command line: peak memory, progress, seconds.

Writes a Slack workspace export (``users.json``, ``channels.json``, one folder per channel with
one ``YYYY-MM-DD.json`` per day; threads: every 8th message answers an earlier one) of
``--messages`` messages over ``--channels`` channels, then runs ``narrative-mirror build --json``
on it in a fresh NM_HOME and reports the peak RSS of the build process, the progress lines it
printed, and per channel the seconds split into encoding and the rest. Target (issue #26): 300k
messages under 4 GB with progress. ``--backends torch,onnx-int8`` builds the same export once per
embedding backend in one run (same machine, same load).

    .venv/bin/python benchmarks/big_slack.py --messages 300000 --channels 20 [--device auto|cpu|cuda] [--backends torch,onnx-int8]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from narrative_mirror.home import Home
from resources import environment

REPO = Path(__file__).resolve().parents[1]
WORDS = (
    "garden deploy release coffee meeting budget design review ticket launch bug customer weekend "
    "train lunch report invoice roadmap sprint metrics dashboard outage hiring offsite slides demo "
    "database cache latency backup migration parser index search kayak marathon recipe holiday"
).split()
PEOPLE = ["Ana Lima", "Ben Ode", "Chen Wu", "Dara Kim", "Eli Ross", "Fay Ito", "Gus Moe", "Hana Sato"]


def write_export(root: Path, messages: int, channels: int, seed: int = 7) -> Path:
    """The export folder; messages spread evenly over the channels, 120 a day per channel."""
    rng = random.Random(seed)
    export = root / "big_slack_export"
    export.mkdir(parents=True)
    users = [
        {
            "id": f"U{i:08d}",
            "name": name.split()[0].lower(),
            "real_name": name,
            "tz": "Europe/Berlin",
            "profile": {"real_name": name, "display_name": name},
        }
        for i, name in enumerate(PEOPLE)
    ]
    (export / "users.json").write_text(json.dumps(users))
    (export / "channels.json").write_text(
        json.dumps(
            [{"id": f"C{c:08d}", "name": f"team-{c:02d}", "members": [u["id"] for u in users]} for c in range(channels)]
        )
    )
    per_channel = messages // channels
    start = datetime(2023, 1, 2, 8, 0, tzinfo=UTC)
    for c in range(channels):
        folder = export / f"team-{c:02d}"
        folder.mkdir()
        day: list[dict] = []
        day_name = None
        stamps: list[str] = []
        for i in range(per_channel):
            moment = start + timedelta(days=i // 120, minutes=4 * (i % 120), seconds=c)
            ts = f"{int(moment.timestamp())}.{i % 1_000_000:06d}"
            stamps.append(ts)
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18))) + f" ({c}-{i})"
            record = {"type": "message", "user": users[rng.randrange(len(users))]["id"], "text": text, "ts": ts}
            if i % 8 == 7:
                record["thread_ts"] = stamps[i - rng.randint(1, 6)]
            name = moment.strftime("%Y-%m-%d")
            if name != day_name and day:
                (folder / f"{day_name}.json").write_text(json.dumps(day))
                day = []
            day_name = name
            day.append(record)
        if day:
            (folder / f"{day_name}.json").write_text(json.dumps(day))
    return export


def embedding_config(folder: Path, backend: str) -> Path:
    """A config folder (NM_CONFIG_DIR) whose embedding.toml is the packaged one with ``backend``."""
    folder.mkdir(parents=True, exist_ok=True)
    packaged = (REPO / "narrative_mirror" / "config" / "embedding.toml").read_text()
    lines = [f'backend = "{backend}"' if line.startswith("backend =") else line for line in packaged.splitlines()]
    (folder / "embedding.toml").write_text("\n".join(lines) + "\n")
    return folder


def build(data: Path, home: Path, device: str, config_dir: Path | None) -> dict:
    """``narrative-mirror build`` of ``data`` into a fresh ``home``: seconds, peak RSS, the split."""
    env = environment.child_env(
        NM_HOME=str(home), NM_DEVICE=device, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"
    )
    if config_dir is not None:
        env["NM_CONFIG_DIR"] = str(config_dir)
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "build", "--data", str(data), "--json"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    progress = []
    for line in proc.stderr:
        progress.append(line.rstrip())
        print(f"  | {line.rstrip()}", file=sys.stderr, flush=True)
    out = proc.stdout.read()
    # this build's own peak (RUSAGE_CHILDREN would keep an earlier build's); Linux: KiB
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    peak = usage.ru_maxrss
    result = json.loads(out) if out.strip() else {}
    per_file = result.get("per_file", {})
    encode = sum(row["seconds"]["encode"] for row in per_file.values())
    other = sum(row["seconds"]["other"] for row in per_file.values())
    return {
        "exit_code": code,
        "build_s": round(seconds, 1),
        "peak_rss_gb": round(peak / 1024 / 1024, 2),
        "built_messages": result.get("messages"),
        "encoded_messages": result.get("encoded_messages"),
        "steps_encode_s": round(encode, 1),
        "steps_other_s": round(other, 1),
        "encode_texts_per_s": round((result.get("encoded_messages") or 0) / max(encode, 1e-9), 1),
        "encode_share": round(encode / max(encode + other, 1e-9), 3),
        "per_partition_s": {k: row["seconds"] for k, row in sorted(per_file.items())[:3]},
        "progress_lines": len(progress),
        "parse_progress": [p for p in progress if "parsed" in p][:3],
        "problems": result.get("problems"),
        "failures": result.get("failures"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--channels", type=int, default=20)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument(
        "--backends",
        default="",
        help="comma-separated embedding backends (embedding.toml's backend), each built in turn from the "
        "same export in a fresh home, in this one run (default: embedding.toml's as it is)",
    )
    parser.add_argument(
        "--onnx-cache",
        type=Path,
        default=None,
        help="a folder of exported ONNX models (NM_HOME/models/onnx) copied into each home first, so the "
        "build measures encoding, not the one-time export",
    )
    parser.add_argument("--keep", action="store_true", help="keep the export and home (printed)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="big_slack_"))
    started = time.perf_counter()
    data = root / "data"
    data.mkdir()
    write_export(data, args.messages, args.channels)
    written = time.perf_counter() - started
    report = {
        "messages": args.messages,
        "channels": args.channels,
        "device": args.device,
        "export_written_s": round(written, 1),
        "builds": {},
    }
    for backend in filter(None, args.backends.split(",")) or [""]:
        home = root / f"home-{backend or 'default'}"
        if args.onnx_cache is not None:
            shutil.copytree(args.onnx_cache, Home(home).onnx_cache)
        config_dir = embedding_config(root / f"config-{backend}", backend) if backend else None
        report["builds"][backend or "embedding.toml"] = build(data, home, args.device, config_dir)
    print(json.dumps(report, indent=1))
    if args.keep:
        print(f"kept: {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
