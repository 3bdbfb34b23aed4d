#!/usr/bin/env bash
# The test suite, each test once, in its two tiers: the pure tests with every model package
# hidden (tests/no_models: a test that loads a model without the `model` mark fails here), then
# the tests that load models. Both run on every core (pytest-xdist), each worker pinned to a
# core of its own (tests/conftest.py), so a model runs on one thread and two workers never spin
# against each other's OpenMP threads (unpinned, two model processes on 2 cores slow each other
# 5-100x). A model test module stays on one worker (--dist loadfile): its fixtures run once.
# Extra arguments go to both pytest runs (`-x`, `-k name`).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHONPATH=tests/no_models .venv/bin/python -m pytest -q -n auto -m "not model" \
  -p no:cacheprovider "$@"
.venv/bin/python -m pytest -q -n auto --dist loadfile -m model -p no:cacheprovider "$@"
