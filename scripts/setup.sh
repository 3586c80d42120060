# Shared by scripts/run and scripts/test: install what is missing, then configure and build.
# Sourced, not run.

TROUPE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TROUPE_PACKAGES=(build-essential cmake pkg-config ccache libcaf-dev libboost-dev rapidjson-dev libspdlog-dev
                 catch2 libsqlite3-dev libssl-dev libcli11-dev prometheus-cpp-dev bubblewrap
                 json-schema-test-suite universal-ctags postgresql-15 libpqxx-dev faketime)

troupe_as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Installs the Debian packages that are missing (and Node.js/npm when no node is on PATH).
troupe_install() {
  local missing=() pkg
  for pkg in "${TROUPE_PACKAGES[@]}" "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "==> installing: ${missing[*]}"
    troupe_as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    troupe_as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

# Configures and builds into $1 with the extra CMake arguments that follow.
troupe_build() {
  local dir="$1"; shift
  echo "==> building in ${dir#"$TROUPE_ROOT"/}"
  cmake -S "$TROUPE_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  cmake --build "$dir" -j "$(nproc)"
}
