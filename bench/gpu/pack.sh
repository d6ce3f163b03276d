#!/usr/bin/env bash
# Packs what the GPU machine needs into .devcarry/ (in .git/info/exclude): the programs,
# tx_tests and bench/gemm_gpu of TX_BUILD_DIR (default build), stripped, with the shared libraries they load that
# are not glibc's, libstdc++'s or the CUDA libraries the machine has (cuBLAS, NCCL), as
# payload.tar.xz; and the Multi30k data under data/.
#
#   bench/gpu/pack.sh [DATA_DIR]      (default ../shared/data/multi30k)
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${TX_BUILD_DIR:-build}"
data="${1:-../shared/data/multi30k}"
grep -qx '/.devcarry/' .git/info/exclude 2>/dev/null || echo '/.devcarry/' >>.git/info/exclude
rm -rf .devcarry && mkdir -p .devcarry/pack/bin .devcarry/pack/lib .devcarry/data
cp "$build"/apps/tx-{train,translate,score,average} "$build/tests/tx_tests" \
  "$build/bench/gemm_gpu" .devcarry/pack/bin/
strip .devcarry/pack/bin/*
ldd .devcarry/pack/bin/* | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | libmvec.so* | ld-linux*) ;;
    libstdc++.so* | libgcc_s.so* | libcublas* | libnccl*) ;;
    *) cp -L "$lib" .devcarry/pack/lib/ ;;
  esac
done
tar cJf .devcarry/payload.tar.xz -C .devcarry/pack bin lib
rm -rf .devcarry/pack
# The files themselves, not the folder: DATA_DIR on the device is .devcarry/data.
cp -r "$data"/. .devcarry/data/
du -sh .devcarry
