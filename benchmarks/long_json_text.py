"""Reading a Telegram ``result.json`` whose one message text is huge: seconds and peak memory.

Writes a single-chat export with one text of ``--megabytes`` MB (and one short message after
it) into a temporary folder, reads it with ``read_export`` in a fresh process (format detection
included) and prints the seconds and the process's peak RSS. Linear reading means 4x the text
takes about 4x the time. Target: 200 MB in under a minute and under 1 GB.

    .venv/bin/python benchmarks/long_json_text.py --megabytes 5 20 200
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
READ = """
import resource, sys, time
from narrative_mirror.exports import read_export
started = time.perf_counter()
characters = sum(len(m.text) for c in read_export(sys.argv[1]) for m in c.messages())
print(f"{time.perf_counter() - started:.2f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} {characters}")
"""


def write_chat(path: Path, megabytes: float) -> None:
    with path.open("w", encoding="utf-8") as handle:
        handle.write('{"name": "Long", "type": "personal_chat", "id": 1, "messages": [')
        handle.write(
            '{"id": 1, "type": "message", "date": "2024-01-01T10:00:00", "date_unixtime": "1704099600", '
            '"from": "Ann", "from_id": "user1", "text": "'
        )
        chunk = "long text " * 100_000  # 1 MB
        for _ in range(int(megabytes)):
            handle.write(chunk)
        handle.write(
            '"}, {"id": 2, "type": "message", "date": "2024-01-01T10:01:00", "date_unixtime": '
            '"1704099660", "from": "Bo", "from_id": "user2", "text": "ok"}]}'
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, nargs="+", default=[5, 20, 80])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for megabytes in args.megabytes:
            path = Path(folder) / "result.json"
            write_chat(path, megabytes)
            out = subprocess.run(
                [sys.executable, "-c", READ, str(path)],
                capture_output=True,
                text=True,
                check=True,
                cwd=REPO,
                env={"PYTHONPATH": str(REPO)},
            ).stdout.split()
            print(f"{megabytes:g} MB text: {out[0]} s, peak RSS {out[1]} MB ({int(out[2]):,} characters read)")


if __name__ == "__main__":
    main()
