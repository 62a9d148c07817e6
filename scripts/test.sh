#!/usr/bin/env bash
# Set up with test dependencies, then run the default test suite (pytest arguments pass through).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --test
exec .venv/bin/python -m pytest "$@"
