#!/usr/bin/env bash
# Set up a development environment in .venv (idempotent) and run a job in it.
#   bash tools/dev.sh test [pytest args]   all tests (what CI runs)
#   bash tools/dev.sh demo                 the suite's main job: `trnsci demo`
#   bash tools/dev.sh info                 `trnsci info`
#   bash tools/dev.sh setup                only set up .venv
# Needs Python >= 3.10 with venv and pip. torch is pinned by constraints/dev.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${TRNSCI_VENV:-.venv}
LIBS="trnblas trnfft trnsparse trnsolver trnrand trntensor"

setup() {
  if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
  fi
  local stamp="$VENV/.trnsci-setup"
  local want
  want=$(cat pyproject.toml constraints/dev.txt packages/*/pyproject.toml | cksum)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  export PIP_CONSTRAINT="$PWD/constraints/dev.txt" PIP_DISABLE_PIP_VERSION_CHECK=1
  "$VENV/bin/python" -m pip install -q --upgrade pip
  local editables=(-e ".[dev]")
  for lib in $LIBS; do editables+=(-e "packages/$lib"); done
  "$VENV/bin/python" -m pip install -q "${editables[@]}"
  echo "$want" > "$stamp"
}

job=${1:-test}
shift || true
case "$job" in
  setup) setup ;;
  test)  setup; exec "$VENV/bin/python" -m pytest "$@" ;;
  demo)  setup; exec "$VENV/bin/trnsci" demo "$@" ;;
  info)  setup; exec "$VENV/bin/trnsci" info "$@" ;;
  *) echo "usage: bash tools/dev.sh {setup|test|demo|info} [args]" >&2; exit 2 ;;
esac
