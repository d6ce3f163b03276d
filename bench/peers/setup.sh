#!/usr/bin/env bash
# Creates bench/.venv with the peers tx is measured against: PyPI's ctranslate2, pymarian,
# sentencepiece, sacrebleu, numpy; PyTorch is Debian's python3-torch, seen through
# --system-site-packages. Benchmarks only: the product never imports them.
#
# Debian's torch uses whatever libblas.so.3 is selected; with the reference BLAS it is ~20x
# slower than it should be, so OpenBLAS is installed too (libopenblas0-openmp).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! /usr/bin/python3 -c "import torch" 2>/dev/null || [ ! -e /usr/lib/x86_64-linux-gnu/openblas-openmp ]; then
  apt-get install -y -qq python3-torch libopenblas0-openmp
fi
[ -x .venv/bin/python ] || /usr/bin/python3 -m venv --system-site-packages .venv
.venv/bin/pip install -q "ctranslate2==4.*" pymarian sentencepiece sacrebleu numpy
.venv/bin/python -c "import ctranslate2, torch; print('bench/.venv: ctranslate2', ctranslate2.__version__, 'torch', torch.__version__)"
