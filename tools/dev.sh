#!/usr/bin/env bash
# Set up a development environment in .venv (idempotent) and run a job in it.
#   bash tools/dev.sh test [pytest args]   all tests (what CI runs)
#   bash tools/dev.sh demo                 the suite's main job: `trnsci demo`
#   bash tools/dev.sh info                 `trnsci info`
#   bash tools/dev.sh wheels [DIR]         build the eight distributions into DIR (default dist/):
#                                          each sdist first, then its wheel from that sdist, as pip does
#   bash tools/dev.sh setup                only set up .venv
#   bash tools/dev.sh test-xla [pytest args]  the device tests on torch-xla's CPU PJRT
#                                          device, in their own venv (.venv-xla, torch 2.9
#                                          + torch-xla 2.9 from constraints/xla.txt, ~5 GB;
#                                          not part of .ci/run)
# Needs Python >= 3.10 with venv and pip. torch is pinned by constraints/dev.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${TRNSCI_VENV:-.venv}
LIBS="trnblas trnfft trnsparse trnsolver trnrand trntensor"
# every distribution's source directory: the core, the six libraries, the umbrella
DISTS="packages/trnsci-core $(for lib in $LIBS; do printf 'packages/%s ' "$lib"; done) ."

# pip, quietly: this machine's pip config names local index folders that
# lack most packages, and pip warns once per package; show all on failure.
pip_quiet() {
  local log rc=0
  log=$(mktemp)
  "$VENV/bin/python" -m pip "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ]; then cat "$log" >&2; else grep -v "is ignored: it is neither a file nor a directory" "$log" || true; fi
  rm -f "$log"
  return "$rc"
}

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
  pip_quiet install -q --upgrade pip
  local editables=(-e ".[dev,docs]" -e packages/trnsci-core)
  for lib in $LIBS; do editables+=(-e "packages/$lib"); done
  pip_quiet install -q "${editables[@]}"
  echo "$want" > "$stamp"
}

# The torch-xla job's own venv: torch 2.9 + torch-xla 2.9 (constraints/xla.txt)
# and the suite's packages without their dev extras (pytest only).
XLA_VENV=${TRNSCI_XLA_VENV:-.venv-xla}
XLA_PKGS="torch torch-xla pytest pytest-benchmark scipy ml_dtypes"
setup_xla() {
  if [ ! -x "$XLA_VENV/bin/python" ]; then
    "$PY" -m venv "$XLA_VENV"
  fi
  local stamp="$XLA_VENV/.trnsci-setup"
  local want
  want=$( (echo "$XLA_PKGS"; cat pyproject.toml constraints/xla.txt packages/*/pyproject.toml) | cksum)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return 0
  fi
  export PIP_CONSTRAINT="$PWD/constraints/xla.txt" PIP_DISABLE_PIP_VERSION_CHECK=1
  VENV=$XLA_VENV pip_quiet install -q --upgrade pip
  # shellcheck disable=SC2086
  VENV=$XLA_VENV pip_quiet install -q $XLA_PKGS
  local editables=(-e packages/trnsci-core)
  for lib in $LIBS; do editables+=(-e "packages/$lib"); done
  VENV=$XLA_VENV pip_quiet install -q "${editables[@]}"
  echo "$want" > "$stamp"
}

# sdist -> wheel for each distribution (python -m build does exactly that by
# default), into one wheelhouse: `pip install --find-links DIR trnsci` then
# installs the suite from it (docs/packaging.md).
wheels() {
  local out=${1:-dist}
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  local log
  log=$(mktemp)
  for d in $DISTS; do
    # build logs to stderr even with -q: keep it, and show it only when a build fails
    if ! "$VENV/bin/python" -m build -q --no-isolation --outdir "$out" "$d" >"$log" 2>&1; then
      cat "$log" >&2
      rm -f "$log"
      return 1
    fi
  done
  rm -f "$log"
  ls "$out"
}

job=${1:-test}
shift || true
case "$job" in
  setup) setup ;;
  test)  setup; exec "$VENV/bin/python" -m pytest "$@" ;;
  demo)  setup; exec "$VENV/bin/trnsci" demo "$@" ;;
  info)  setup; exec "$VENV/bin/trnsci" info "$@" ;;
  wheels) setup; wheels "$@" ;;
  setup-xla) setup_xla ;;
  test-xla)
    setup_xla
    # XLA's CPU PJRT device stands in for a NeuronCore's XLA device
    export PJRT_DEVICE=CPU TRNSCI_XLA_JOB=1
    if [ "$#" -eq 0 ]; then set -- tests/test_core_xla.py -q; fi
    exec "$XLA_VENV/bin/python" -m pytest -p no:cacheprovider "$@" ;;
  *) echo "usage: bash tools/dev.sh {setup|test|demo|info|wheels|setup-xla|test-xla} [args]" >&2; exit 2 ;;
esac
