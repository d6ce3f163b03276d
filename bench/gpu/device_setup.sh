# Sourced by device_run.sh: the payload unpacked where the tests' compiled-in paths expect it
# (/work/main, its build/ and ../shared/data). Needs payload, data, out, root.
# DEVICE=cpu (a script's smoke test on a machine without a GPU): only OUT, build/ left as it is.
mkdir -p "$out"
# shellcheck disable=SC2317  # return when sourced, exit when not
[ "${DEVICE:-cuda}" = cuda ] || return 0 2>/dev/null || exit 0

tx=/tmp/tx
mkdir -p "$tx" && tar xJf "$payload" -C "$tx"
export LD_LIBRARY_PATH="$tx/lib"
for name in libcublas.so.13 libnccl.so.2; do
  p=$(find /usr/local/cuda*/ /usr/lib /opt -name "$name" 2>/dev/null | head -1)
  [ -n "$p" ] && LD_LIBRARY_PATH+=":$(dirname "$p")"
done
mkdir -p /work /work/shared/data
[ -e /work/main ] || ln -s "$root" /work/main
[ -e /work/shared/data/multi30k ] || ln -s "$(cd "$data" && pwd)" /work/shared/data/multi30k
mkdir -p /work/main/build/apps /work/main/build/tests /work/main/build/bench
cp "$tx"/bin/tx-* /work/main/build/apps/ && cp "$tx/bin/tx_tests" /work/main/build/tests/
[ ! -f "$tx/bin/gemm_gpu" ] || cp "$tx/bin/gemm_gpu" /work/main/build/bench/

