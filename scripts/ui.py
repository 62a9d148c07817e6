"""Runs the Dagster UI and daemon (``dagster dev -w workspace.yaml``, what ``dg dev`` starts; extra
arguments passed on) so that SIGTERM and SIGINT stop it, started in the background too.

Why a wrapper: a job started with ``&`` inherits SIGINT ignored, and Python then never installs
its Ctrl-C handler, so ``dg dev`` ignores SIGINT; and neither signal reliably ends ``dg`` itself
or reaches the webserver, daemon and code servers it started. Here ``dagster dev`` runs in its own process group with SIGINT
restored; a SIGTERM or SIGINT to this process becomes a SIGINT to that group (dagster's own clean
shutdown), then SIGTERM and SIGKILL if it is still there after GRACE_S seconds each.

    .venv/bin/python scripts/ui.py [-p 3000] &    # kill -TERM $! stops all of it
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

GRACE_S = 20


def main(argv: list[str]) -> int:
    dagster = Path(sys.executable).with_name("dagster")
    child = subprocess.Popen(
        [str(dagster), "dev", "-w", "workspace.yaml", *argv],
        cwd=Path(__file__).resolve().parents[1],
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )

    def stop(signum, _frame):
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(child.pid, sig)
                child.wait(timeout=GRACE_S)
                break
            except subprocess.TimeoutExpired:
                continue
            except ProcessLookupError:
                break
        try:  # what the group left behind (a code server that outlived dg dev)
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return child.wait()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
