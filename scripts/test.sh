#!/usr/bin/env bash
# Set up with test dependencies, then run the test suite (pytest arguments pass through).
#   scripts/test.sh                  the default suite on three workers (NM_TEST_WORKERS; the tiers `slow`, `e2e`,
#                                    `browser`, `llm_server` and `services` are left out: tests/README.md)
#   scripts/test.sh -m e2e           one tier (`-m "slow or e2e"`: several)
#   scripts/test.sh -n 3 --dist worksteal --all-tiers
#                                    every tier in one session, services included (.ci/run): no tier left out, an
#                                    -m expression alone selects (-m "not services": every local tier)
#   scripts/test.sh -m services      the tests on real servers: PostgreSQL, Redis + Celery workers and an
#                                    S3-compatible server, installed if missing and started on loopback by
#                                    scripts/services.sh, stopped at the end (unless they were already running)
set -euo pipefail
cd "$(dirname "$0")/.."
# NM_TEST_SET_UP=1: the caller ran `scripts/setup.sh --test` already (.ci/run, once for every tier).
[ "${NM_TEST_SET_UP:-0}" = 1 ] || bash scripts/setup.sh --test

# Does the -m expression select the `services` tests? Is a tier (-m) or a worker count (-n) given?
wants_services=0
has_m=0
has_n=0
all_tiers=0
prev=""
for arg in "$@"; do
  case "$arg" in
    -m|-m*) has_m=1 ;;
    -n|-n*|--numprocesses*) has_n=1 ;;
    --all-tiers) all_tiers=1 ;;
  esac
  expr=""
  case "$arg" in
    -m) ;;
    -m=*) expr="${arg#-m=}" ;;
    -m*) expr="${arg#-m}" ;;
  esac
  [ "$prev" = "-m" ] && expr="$arg"
  # ... other than as "not services"
  if [ -n "$expr" ] && [[ "$(echo "$expr" | sed -E 's/not[[:space:]]+services//g')" == *services* ]]; then
    wants_services=1
  fi
  prev="$arg"
done
# --all-tiers without -m: every tier, services included
[ "$all_tiers" = 1 ] && [ "$has_m" = 0 ] && wants_services=1

# The default suite runs on NM_TEST_WORKERS pytest-xdist workers (default 3; 0: one process). Work stealing:
# a worker that runs out takes queued tests from the others, so none is left alone with a long queue at the end.
workers=()
if [ "$has_m" = 0 ] && [ "$has_n" = 0 ] && [ "${NM_TEST_WORKERS:-3}" != 0 ]; then
  workers=(-n "${NM_TEST_WORKERS:-3}" --dist worksteal)
fi

if [ "$wants_services" = 1 ]; then
  started_here=0
  bash scripts/services.sh status 2>/dev/null || started_here=1
  env_file=$(bash scripts/services.sh start)
  # shellcheck disable=SC1090
  . "$env_file"
  if [ "$started_here" = 1 ]; then
    trap 'bash scripts/services.sh stop' EXIT
  fi
  .venv/bin/python -m pytest "${workers[@]}" "$@"
else
  exec .venv/bin/python -m pytest "${workers[@]}" "$@"
fi
