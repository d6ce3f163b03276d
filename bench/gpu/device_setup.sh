# Shared by the device_*.sh scripts (sourced): logging, the per-phase time limit, and the
# payload unpacked where the tests' compiled-in paths expect it. Needs payload, data, out, root.
mkdir -p "$out"
say() { echo "== $(date +%T) $*" | tee -a "$out/summary.txt"; }
phase() {  # phase NAME SECONDS COMMAND...: run with a limit, log to OUT/NAME.log
  local name="$1" limit="$2"; shift 2
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  say "$name: rc $rc in $((SECONDS - t0)) s"
  tail -n 4 "$out/$name.log" | sed 's/^/    /' | tee -a "$out/summary.txt"
}

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
mkdir -p /work/main/build/apps /work/main/build/tests
cp "$tx"/bin/tx-* /work/main/build/apps/ && cp "$tx/bin/tx_tests" /work/main/build/tests/
bin=/work/main/build/apps
export OMP_WAIT_POLICY=passive

