#!/usr/bin/env bash
# Creates bench/.venv with the peers tx is measured against (PyPI: ctranslate2, sentencepiece,
# sacrebleu, numpy). Benchmarks only: the product never imports them.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || /usr/bin/python3 -m venv .venv
.venv/bin/pip install -q "ctranslate2==4.*" sentencepiece sacrebleu numpy
.venv/bin/python -c "import ctranslate2; print('bench/.venv: ctranslate2', ctranslate2.__version__)"
