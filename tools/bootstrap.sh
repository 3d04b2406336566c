#!/usr/bin/env bash
# Set up everything dmlgpu needs on Debian 12 and run one job:
#
#   tools/bootstrap.sh demo    # python -m dmlgpu demo on the default device
#   tools/bootstrap.sh test    # the test suite (what .ci/run calls)
#   tools/bootstrap.sh bench   # the benchmark harness
#
# Every step is skipped when its result is already there, so a second run starts the job within
# seconds. Steps: Debian packages -> .venv -> Python tools -> kp 0.9.0 built from its PyPI sdist
# with our patches (third_party/kompute/patches) and Debian's Vulkan headers and fmt -> dmlgpu
# (its CMake preset compiles and validates the SPIR-V).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
job=${1:-}
case "$job" in demo|test|bench|setup) ;; *)
  echo "usage: tools/bootstrap.sh demo|test|bench|setup" >&2; exit 2;;
esac
shift || true

# shellcheck source=tools/versions.sh
source "$root/tools/versions.sh"
say() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*"; }

# 1. Debian packages.
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  say "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# 2. The virtual environment and the Python tools.
py="$root/.venv/bin/python"
if ! "$py" -c "" 2>/dev/null; then
  say "creating .venv"
  rm -rf .venv
  python3 -m venv .venv
fi
stamp() { printf '%s' "$*" | sha256sum | cut -c1-16; }
deps_stamp=$(stamp "${PIP_PACKAGES[*]}")
if [ "$(cat .venv/.deps 2>/dev/null)" != "$deps_stamp" ]; then
  say "installing Python packages: ${PIP_PACKAGES[*]}"
  "$py" -m pip install -q --disable-pip-version-check "${PIP_PACKAGES[@]}"
  echo "$deps_stamp" >.venv/.deps
fi

# 3. kp from its sdist, patched (the sdist would otherwise clone its dependencies from GitHub).
kp_stamp=$(cat third_party/kompute/patches/*.patch | stamp "$KP_VERSION" "$(cat)")
if [ "$(cat .venv/.kp 2>/dev/null)" != "$kp_stamp" ] || ! "$py" -c "import kp" 2>/dev/null; then
  wheel_dir="$root/.cache/kp/$kp_stamp"
  if ! ls "$wheel_dir"/kp-*.whl >/dev/null 2>&1; then
    say "building kp $KP_VERSION from its sdist (about a minute)"
    "$root/tools/build_kp.sh" "$py" "$wheel_dir"
  fi
  "$py" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$wheel_dir"/kp-*.whl
  echo "$kp_stamp" >.venv/.kp
fi

# 4. dmlgpu itself, rebuilt when any tracked source changed.
src_stamp=$(find dmlgpu shaders CMakeLists.txt CMakePresets.json pyproject.toml setup.py -type f \
  -not -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum | stamp "$(cat)")
if [ "$(cat .venv/.dmlgpu 2>/dev/null)" != "$src_stamp" ] || ! "$py" -c "import dmlgpu" 2>/dev/null; then
  say "installing dmlgpu (CMake compiles the shaders)"
  rm -rf build/python
  "$py" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall .
  echo "$src_stamp" >.venv/.dmlgpu
fi

# 5. The job, run from / so that Python imports the installed package, never the source tree.
cd /
case "$job" in
  demo) exec "$py" -m dmlgpu demo "$@" ;;
  bench) exec "$py" -m dmlgpu bench "$@" ;;
  test)
    # Twice: as users run it, then under the Khronos validation layer, where any message the
    # layer reports fails the test that caused it (tests/conftest.py).
    pytest=("$root/.venv/bin/pytest" -c "$root/pyproject.toml" --rootdir "$root" -p no:cacheprovider "$root/tests")
    say "test suite"
    "${pytest[@]}" "$@"
    say "test suite again, under the Khronos validation layer"
    log=$(mktemp -t dmlgpu-validation.XXXXXX)
    DMLGPU_VALIDATION=1 DMLGPU_VALIDATION_LOG="$log" "${pytest[@]}" "$@"
    [ ! -s "$log" ] || { echo "validation layer messages: $log" >&2; exit 1; }
    rm -f "$log" ;;
  setup) say "ready: $("$py" -c 'import dmlgpu, sys; sys.stdout.write(dmlgpu.__file__)')" ;;
esac
