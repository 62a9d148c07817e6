#!/usr/bin/env bash
# One worker of the distributed engine (Celery): runs the asset steps that runs launched with
# NM_CELERY_BROKER_URL set send to the broker, one step at a time per worker process.
#
#   NM_CELERY_BROKER_URL=redis://broker:6379/0 scripts/worker.sh [NAME] [celery worker options...]
#
# Start one per core you want to use, on this machine or others. Every worker needs the same
# environment as the processes that launch runs (see README "One machine or many"): the code
# (this checkout and its .venv), NM_DAGSTER_PG_URL (the instance the runs live in), NM_HOME on a
# shared volume (parquet outputs), NM_DATA_DIR, NM_LANCEDB_URI + AWS_* (the shared index), and
# OPENAI_* for the LLM. Stop it with SIGTERM (it finishes the step in hand first).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${NM_CELERY_BROKER_URL:?NM_CELERY_BROKER_URL must name the Celery broker, e.g. redis://127.0.0.1:6379/0}"
NAME="${1:-nm-worker}"
[ $# -gt 0 ] && shift
VENV_BIN="${NM_VENV_BIN:-.venv/bin}"
# -P solo: the step runs in the worker process itself (no fork after torch/LanceDB are loaded);
# prefetch 1: a worker takes a step only when it is free, so idle workers get the next ones.
exec "$VENV_BIN/celery" -A dagster_celery.app -b "$NM_CELERY_BROKER_URL" \
  --result-backend "${NM_CELERY_BACKEND_URL:-$NM_CELERY_BROKER_URL}" \
  worker -Q dagster -P solo --prefetch-multiplier 1 --without-gossip --without-mingle \
  -n "$NAME@%h" -l "${NM_WORKER_LOGLEVEL:-INFO}" "$@"
