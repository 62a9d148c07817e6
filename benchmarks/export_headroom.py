"""How far the largest realistic exports sit below config/exports.toml's limits.

Writes a 10-year WhatsApp chat (``--per-day`` messages a day, one in 500 a long pasted text of
``--long`` characters) and a big Slack workspace (benchmarks/big_slack.py's generator, day files
re-written with Slack's 4-space indent), zips both, and reports per export: entries, unpacked
bytes, the largest member, the highest member ratio, the longest line, each against its limit;
then reads both through ``find_folder_chats`` in a child process and reports seconds and peak RSS.

    .venv/bin/python benchmarks/export_headroom.py --per-day 300 --slack-messages 1000000 --channels 100
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import zipfile
from datetime import datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from big_slack import WORDS, write_export  # noqa: E402

from narrative_mirror.exports.limits import read_limits  # noqa: E402


def write_whatsapp(folder: Path, per_day: int, long: int, years: int = 10, seed: int = 3) -> Path:
    rng = random.Random(seed)
    path = folder / "_chat.txt"
    start = datetime(2015, 1, 1, 7, 0)
    with path.open("w", encoding="utf-8") as out:
        for day in range(365 * years):
            for n in range(per_day):
                moment = start + timedelta(days=day, seconds=n * 50_000 // per_day)
                author = ("Ann", "Bob")[rng.randrange(2)]
                words = long // 7 if rng.randrange(500) == 0 else rng.randint(2, 20)
                text = " ".join(rng.choice(WORDS) for _ in range(words))[: max(long, 1)]
                out.write(f"[{moment:%d/%m/%Y, %H:%M:%S}] {author}: {text}\n")
    return path


def zip_folder(folder: Path, target: Path) -> Path:
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(p for p in folder.rglob("*") if p.is_file()):
            archive.write(file, file.relative_to(folder.parent).as_posix())
    return target


def measure(archive: Path) -> dict:
    with zipfile.ZipFile(archive) as zipped:
        infos = [i for i in zipped.infolist() if not i.is_dir()]
        longest = 0
        for info in infos:
            if info.filename.endswith(".txt"):
                with zipped.open(info) as handle:
                    longest = max(longest, max(len(line.decode()) for line in handle))
    return {
        "entries": len(infos),
        "unpacked_bytes": sum(i.file_size for i in infos),
        "largest_member_bytes": max(i.file_size for i in infos),
        "highest_ratio": round(max(i.file_size / max(i.compress_size, 1) for i in infos), 1),
        "longest_line_chars": longest,
        "zip_bytes": archive.stat().st_size,
    }


def read_in_child(data: Path) -> dict:
    code = (
        "import json, resource, sys, time; from pathlib import Path; "
        "from narrative_mirror.exports.folder import ImportOptions, find_folder_chats; t = time.monotonic(); "
        "chats, problems = find_folder_chats(Path(sys.argv[1]), ImportOptions(tz='UTC')); "
        "print(json.dumps({'chats': len(chats), 'problems': problems, 'seconds': round(time.monotonic() - t, 1), "
        "'peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(data)], capture_output=True, text=True, cwd=REPO, check=True)
    return json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-day", type=int, default=300)
    parser.add_argument("--long", type=int, default=65_536, help="characters of the longest messages (WhatsApp's cap)")
    parser.add_argument("--slack-messages", type=int, default=1_000_000)
    parser.add_argument("--channels", type=int, default=100)
    args = parser.parse_args()
    limits = read_limits()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        chat = root / "src" / "WhatsApp Chat - Ten Years"
        chat.mkdir(parents=True)
        write_whatsapp(chat, args.per_day, args.long)
        slack = write_export(root / "src", args.slack_messages, args.channels)
        for day in slack.glob("*/*.json"):
            day.write_text(json.dumps(json.loads(day.read_text()), indent=4))
        data = root / "data"
        data.mkdir()
        report = {"limits": vars(limits)}
        started = time.monotonic()
        for name, folder in (("whatsapp", chat), ("slack", slack)):
            archive = zip_folder(folder, data / f"{folder.name}.zip")
            report[name] = measure(archive)
        report["zipped_in_s"] = round(time.monotonic() - started, 1)
        report["read"] = read_in_child(data)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
