#!/usr/bin/env bash
# Set up everything dmlgpu needs on Debian 12 and run one job:
#
#   tools/bootstrap.sh demo    # python -m dmlgpu demo on the default device
#   tools/bootstrap.sh test    # the test suite, against the built wheel (what .ci/run calls)
#   tools/bootstrap.sh bench   # the benchmark harness
#   tools/bootstrap.sh setup   # only the set-up
#
# Every step is skipped when its result is already there, so a second run starts the job within
# seconds. Steps: Debian packages -> .venv with the build and test requirements -> dmlgpu
# installed editable into .venv: pip runs scikit-build-core, which builds CMake's python preset
# (the SPIR-V, and dmlgpu._kompute from the kp sdist with third_party/kompute/patches) in
# build/<wheel tag> and rebuilds there when dmlgpu is imported after a source changed, so .venv
# also runs pytest and `python -m dmlgpu` from the repository root. `test` then builds the wheel
# from the same build tree, installs it into its own venv (.cache/test-venv) and runs the suite
# from /, against the installed package only.
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
stamp() { printf '%s' "$*" | sha256sum | cut -c1-16; }
pip_quiet=(-q --disable-pip-version-check)
# Builds without isolation, in a build tree that persists (the editable install rebuilds there).
pip_build=(--no-build-isolation --no-deps "-Cbuild-dir=build/{wheel_tag}")

# 1. Debian packages; on Debian 12, lavapipe from its backports (versions.sh says why).
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  installed "$pkg" || missing+=("$pkg")
done
backports=()
if grep -qx 'VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null; then
  version=$(dpkg-query -W -f='${Version}' "$LAVAPIPE_PACKAGE" 2>/dev/null || true)
  if ! installed "$LAVAPIPE_PACKAGE" || dpkg --compare-versions "$version" lt "$LAVAPIPE_MIN_VERSION"; then
    backports=("$LAVAPIPE_PACKAGE")
  fi
elif ! installed "$LAVAPIPE_PACKAGE"; then
  missing+=("$LAVAPIPE_PACKAGE")
fi
if ((${#missing[@]} + ${#backports[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  if ((${#backports[@]})); then
    list=/etc/apt/sources.list.d/$LAVAPIPE_SUITE.list
    if ! grep -rqs "^[^#]*$LAVAPIPE_SUITE" /etc/apt/sources.list /etc/apt/sources.list.d/; then
      say "adding Debian's $LAVAPIPE_SUITE to apt's sources ($list)"
      echo "deb http://deb.debian.org/debian $LAVAPIPE_SUITE main" | $sudo tee "$list" >/dev/null
    fi
  fi
  say "installing Debian packages: ${missing[*]:+${missing[*]} }${backports[*]:+${backports[*]} (from $LAVAPIPE_SUITE)}"
  $sudo apt-get update -qq
  if ((${#missing[@]})); then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  if ((${#backports[@]})); then
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      -t "$LAVAPIPE_SUITE" "${backports[@]}" >/dev/null
  fi
fi

# 2. A virtual environment with the build and test requirements (.venv, and the test's own).
venv() {  # venv DIR: create it if needed, install the Python packages when their list changed
  local dir=$1 deps_stamp
  if ! "$dir/bin/python" -c "" 2>/dev/null; then
    say "creating $dir"
    rm -rf "$dir"
    python3 -m venv "$dir"
  fi
  deps_stamp=$(stamp "${BUILD_PIP_PACKAGES[*]} ${TEST_PIP_PACKAGES[*]}")
  if [ "$(cat "$dir/.deps" 2>/dev/null)" != "$deps_stamp" ]; then
    say "installing Python packages into $dir: ${BUILD_PIP_PACKAGES[*]} ${TEST_PIP_PACKAGES[*]}"
    "$dir/bin/python" -m pip install "${pip_quiet[@]}" "${BUILD_PIP_PACKAGES[@]}" "${TEST_PIP_PACKAGES[@]}"
    echo "$deps_stamp" >"$dir/.deps"
  fi
}
py="$root/.venv/bin/python"
venv .venv
# A .venv made before dmlgpu carried Kompute has a separate kp installed: remove it.
if [ -e .venv/.kp ]; then
  "$py" -m pip uninstall "${pip_quiet[@]}" -y kp
  rm -f .venv/.kp
fi

# 3. dmlgpu, editable, with its build tree in build/<wheel tag>. Python sources
#    are read from the tree and a changed shader, patch or table rebuilds at the next import
#    (the table's typed front end, dmlgpu/functions.py and tensor_operators.py, is written by
#    CMake's configure step: a clone has it after this step), so this
#    only reruns when the packaging itself changed.
editable_stamp=$(stamp "$(cat pyproject.toml)" "${pip_build[*]}")
if [ "$(cat .venv/.dmlgpu 2>/dev/null)" != "$editable_stamp" ] || ! "$py" -c "import dmlgpu._kompute, dmlgpu._host_copy" 2>/dev/null; then
  say "building dmlgpu (CMake: shaders, and Kompute from the kp sdist: a few minutes the first time)"
  "$py" -m pip install "${pip_quiet[@]}" "${pip_build[@]}" \
    -Ceditable.rebuild=true -Ceditable.verbose=false -e .
  echo "$editable_stamp" >.venv/.dmlgpu
fi

# 4. The job, run from / so that Python imports the installed package, never the source tree.
case "$job" in
  demo) cd / && exec "$py" -m dmlgpu demo "$@" ;;
  bench) cd / && exec "$py" -m dmlgpu bench "$@" ;;
  setup) cd / && say "ready: $("$py" -c 'import dmlgpu, sys; sys.stdout.write(dmlgpu.__file__)')" ;;
  test)
    # The wheel, from the build tree that .venv's install left (seconds when nothing changed),
    # installed into a venv of its own where nothing but the wheel provides dmlgpu.
    wheels="$root/.cache/wheel"
    rm -rf "$wheels"
    say "building the dmlgpu wheel"
    "$py" -m pip wheel "${pip_quiet[@]}" "${pip_build[@]}" -w "$wheels" .
    venv .cache/test-venv
    tpy="$root/.cache/test-venv/bin/python"
    "$tpy" -m pip install "${pip_quiet[@]}" --no-deps --force-reinstall "$wheels"/dmlgpu-*.whl
    "$tpy" -m pip check >/dev/null
    cd /
    # Twice: as users run it, then under the Khronos validation layer, where any message the
    # layer reports fails the test that caused it (tests/conftest.py).
    pytest=("$tpy" -m pytest -c "$root/pyproject.toml" --rootdir "$root" -p no:cacheprovider "$root/tests")
    say "test suite ($("$tpy" -c 'import dmlgpu, sys; sys.stdout.write(dmlgpu.__file__)'))"
    "${pytest[@]}" "$@"
    say "test suite again, under the Khronos validation layer"
    log=$(mktemp -t dmlgpu-validation.XXXXXX)
    DMLGPU_VALIDATION=1 DMLGPU_VALIDATION_LOG="$log" "${pytest[@]}" "$@"
    [ ! -s "$log" ] || { echo "validation layer messages: $log" >&2; exit 1; }
    rm -f "$log" ;;
esac
