#!/usr/bin/env bash
# The test suite, each test once, in its two tiers: the pure tests with every model package
# hidden (tests/no_models: a test that loads a model without the `model` mark fails here), on
# every core (pytest-xdist: they are single-threaded simulations and parsers), then the tests
# that load models, one at a time (two model processes on 2 cores slow each other 5-100x).
# Extra arguments go to both pytest runs (`-x`, `-k name`).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHONPATH=tests/no_models .venv/bin/python -m pytest -q -n auto -m "not model" \
  -p no:cacheprovider "$@"
.venv/bin/python -m pytest -q -m model "$@"
