# Sourced by scripts/test and scripts/demo: installs the Debian packages tx builds with,
# only those missing, quietly when all are present.
tx_packages=(cmake g++ ccache pkg-config libdnnl-dev ocl-icd-opencl-dev libcli11-dev
             nlohmann-json3-dev catch2 libsentencepiece-dev sentencepiece
             libopenmpi-dev openmpi-bin libzip-dev zlib1g-dev libyaml-cpp-dev)

tx_install_deps() {
  local missing=()
  for p in "${tx_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "tx: installing ${missing[*]}" >&2
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >&2
}

# Configures and builds into ${TX_BUILD_DIR:-build} (Release, assertions kept): the targets
# given as arguments, or everything. TX_CMAKE_ARGS adds configure options.
tx_build() {
  local dir="${TX_BUILD_DIR:-build}" targets=()
  # ccache hits across clones and build folders: paths under the checkout are hashed relative
  # to it, and the build folder's name is left out of the hash (-g records it, harmlessly).
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  for t in "$@"; do targets+=(--target "$t"); done
  # shellcheck disable=SC2086  # TX_CMAKE_ARGS is a list of words
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release ${TX_CMAKE_ARGS:-} >"$dir.configure.log" 2>&1 \
    || { cat "$dir.configure.log" >&2; return 1; }
  cmake --build "$dir" -j "$(nproc)" "${targets[@]}"
}
