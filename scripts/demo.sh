#!/usr/bin/env bash
# Main job on the embedded default: set up, then build and evaluate the packaged demo chats
# with offline models. State goes to $NM_HOME (default ~/.narrative-mirror).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/narrative-mirror demo "$@"
