#!/usr/bin/env bash
# Set up everything dmlgpu needs and run one job:
#
#   tools/bootstrap.sh demo    # python -m dmlgpu demo on the default device
#   tools/bootstrap.sh test    # the wheel, its smoke test, then the test suite against it (what .ci/run calls)
#   tools/bootstrap.sh bench   # the benchmark harness
#   tools/bootstrap.sh wheel   # the portable wheel in dist/ (what tools/build_wheel.sh calls)
#   tools/bootstrap.sh setup   # only the set-up
#
# Every step is skipped when its result is already there, so a second run starts the job within
# seconds. Steps: system packages (installed with apt on Debian and Ubuntu; elsewhere named, for
# you to install, before anything is changed) -> .venv with the build and test requirements and
# zig (PyPI's ziglang) -> glslang and fmt built for glibc 2.28 (tools/manylinux_deps.sh, once per user) ->
# dmlgpu installed editable into .venv: pip runs scikit-build-core, which builds CMake's manylinux
# preset (the SPIR-V; dmlgpu.runtime._kompute from the kp sdist with third_party/kompute/patches,
# _glsl and _host_copy, compiled by zig for glibc 2.28) in build/manylinux-<wheel tag> and
# rebuilds there when dmlgpu is imported after a source changed, so .venv also runs pytest and
# `python -m dmlgpu` from the repository root. `wheel` packs that build tree into a wheel and
# tags it manylinux_2_28 with auditwheel; `test` then installs it into a fresh venv with no
# compiler on PATH for the smoke test (tools/wheel_smoke.py), and into .cache/test-venv for the
# suite, run from / against the installed package only. docs/guide/install-wheel.md says why.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
job=${1:-}
case "$job" in demo|test|bench|wheel|setup) ;; *)
  echo "usage: tools/bootstrap.sh demo|test|bench|wheel|setup" >&2; exit 2;;
esac
shift || true

# shellcheck source=tools/versions.sh
source "$root/tools/versions.sh"
say() { printf '\033[1m[bootstrap %ss]\033[0m %s\n' "$SECONDS" "$*"; }  # seconds since it started
stamp() { printf '%s' "$*" | sha256sum | cut -c1-16; }
pip_quiet=(-q --disable-pip-version-check)

# 1. System packages. With apt (Debian, Ubuntu) they are installed; on any other system the
#    needs are checked and, where one is missing, the packages are named and nothing is done.
#    DMLGPU_OS_RELEASE names another os-release file (to see what another system would be told).
os_release=${DMLGPU_OS_RELEASE:-/etc/os-release}
os_ids=$(sed -n 's/^\(ID\|ID_LIKE\)=//p' "$os_release" 2>/dev/null | tr -d '"' | tr '\n' ' ')
os_name=$(sed -n 's/^PRETTY_NAME=//p' "$os_release" 2>/dev/null | tr -d '"')
if [ "$(uname -m)" != x86_64 ]; then
  echo "tools/bootstrap.sh: dmlgpu builds for x86-64 Linux (glibc 2.28 or newer); this is $(uname -m)" >&2
  exit 1
fi
manager=""
for id in $os_ids; do
  case "$id" in
    debian|ubuntu) manager=apt-get ;;
    fedora|rhel|centos) manager=dnf ;;
    arch) manager=pacman ;;
    suse|opensuse|opensuse-*) manager=zypper ;;
    *) continue ;;
  esac
  break
done
[ "$manager" != apt-get ] || command -v apt-get >/dev/null || manager=""

has() {  # has CHECK: whether the system provides it (OTHER_SYSTEM_NEEDS' first field)
  case "$1" in
    cmd:*) command -v "${1#cmd:}" >/dev/null ;;
    file:*) compgen -G "${1#file:}" >/dev/null ;;
    loader:*) python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "${1#loader:}" 2>/dev/null ;;
    python-dev) python3 -c "import ensurepip, os, sysconfig, venv
assert os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h'))" 2>/dev/null ;;
  esac
}
if [ "$manager" != apt-get ]; then
  missing=() packages=()
  for need in "${OTHER_SYSTEM_NEEDS[@]}"; do
    IFS='|' read -r check dnf pacman zypper jobs <<<"$need"
    [ -z "$jobs" ] || [[ " $jobs " == *" $job "* ]] || continue
    has "$check" && continue
    missing+=("${check#*:}")
    case "$manager" in
      dnf) packages+=("$dnf") ;; pacman) packages+=("$pacman") ;; zypper) packages+=("$zypper") ;;
      *) packages+=("$dnf (Fedora) / $pacman (Arch) / $zypper (openSUSE)") ;;
    esac
  done
  if ((${#missing[@]})); then
    readarray -t packages < <(printf '%s\n' "${packages[@]}" | awk '!seen[$0]++')
    {
      echo "tools/bootstrap.sh installs packages itself only with apt (Debian, Ubuntu); this is ${os_name:-an unknown system}."
      echo "Missing: ${missing[*]}"
      case "$manager" in
        dnf) echo "Install them with:  sudo dnf install ${packages[*]}" ;;
        pacman) echo "Install them with:  sudo pacman -S --needed ${packages[*]}" ;;
        zypper) echo "Install them with:  sudo zypper install ${packages[*]}" ;;
        *) echo "Install, with your package manager, the packages that provide them:"
           printf '  %s\n' "${packages[@]}" ;;
      esac
      echo "then run tools/bootstrap.sh $job again. Nothing was changed."
    } >&2
    exit 1
  fi
fi

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }
missing=()
[ "$manager" = apt-get ] && for pkg in "${APT_PACKAGES[@]}"; do
  installed "$pkg" || missing+=("$pkg")
done
backports=()
if [ "$manager" != apt-get ]; then
  :
elif grep -qx 'VERSION_CODENAME=bookworm' "$os_release" 2>/dev/null; then
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
venv() {  # venv DIR PACKAGES...: create it if needed, install the packages when their list changed
  local dir=$1 deps_stamp
  shift
  if ! "$dir/bin/python" -c "" 2>/dev/null; then
    say "creating $dir"
    rm -rf "$dir"
    python3 -m venv "$dir"
  fi
  deps_stamp=$(stamp "$*")
  if [ "$(cat "$dir/.deps" 2>/dev/null)" != "$deps_stamp" ]; then
    say "installing Python packages into $dir: $*"
    "$dir/bin/python" -m pip install "${pip_quiet[@]}" "$@"
    echo "$deps_stamp" >"$dir/.deps"
  fi
}
py="$root/.venv/bin/python"
venv .venv "${BUILD_PIP_PACKAGES[@]}" "${TEST_PIP_PACKAGES[@]}" "${CHEM_TEST_PIP_PACKAGES[@]}" "${WHEEL_PIP_PACKAGES[@]}"
# The test job's own venv (step 4) is made meanwhile: pip waits on the network and the disk
# while the compilers below take the cores.
if [ "$job" = test ]; then
  test_venv_log=$root/.cache/test-venv.log
  mkdir -p "$root/.cache"
  venv .cache/test-venv "${BUILD_PIP_PACKAGES[@]}" "${TEST_PIP_PACKAGES[@]}" "${CHEM_TEST_PIP_PACKAGES[@]}" >"$test_venv_log" 2>&1 &
  test_venv_pid=$!
fi
# A .venv made before dmlgpu carried Kompute has a separate kp installed: remove it.
if [ -e .venv/.kp ]; then
  "$py" -m pip uninstall "${pip_quiet[@]}" -y kp
  rm -f .venv/.kp
fi

# 3. glslang and fmt for glibc 2.28 (minutes, once: tools/manylinux_deps.sh), then dmlgpu, editable,
#    with its build tree in build/manylinux-<wheel tag>. Python sources are read from the tree and
#    a changed shader, patch or table rebuilds at the next import (the table's typed front end,
#    dmlgpu/front/functions.py and tensor_operators.py, is written by CMake's configure step: a
#    clone has it after this step), so this only reruns when the packaging itself changed.
#    glslang and fmt's prefix and zig's cache (its libc++ for the target: minutes to build) are
#    each named by what they are made from, so they are kept per user, not per clone, in
#    ${XDG_CACHE_HOME:-~/.cache}/dmlgpu-build: a second clone or branch builds neither again.
#    That folder is used only while private (0700, the user's own, not a link); else .cache here.
#    Compilers run one job per core (CMAKE_BUILD_PARALLEL_LEVEL), not ninja's cores + 2.
private_dir() { [ ! -L "$1" ] && mkdir -p -m 700 "$1" 2>/dev/null && [ -O "$1" ] && [ "$(stat -c %a "$1")" = 700 ]; }
build_cache=${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/dmlgpu-build
private_dir "$build_cache" || build_cache=$root/.cache
export DMLGPU_BUILD_CACHE=$build_cache
export ZIG_GLOBAL_CACHE_DIR=${ZIG_GLOBAL_CACHE_DIR:-$build_cache/zig}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
deps=$(PATH="$root/.venv/bin:$PATH" tools/manylinux_deps.sh "$py")  # its cmake -G Ninja: .venv's ninja
# Builds without isolation, in a build tree that persists (the editable install rebuilds there,
# and the wheel is packed from it): the manylinux preset, zig's compilers, glslang and fmt above.
pip_build=(--no-build-isolation --no-deps "-Cbuild-dir=build/manylinux-{wheel_tag}"
           "-Ccmake.args=--preset=manylinux" "-Ccmake.define.DMLGPU_MANYLINUX_PREFIX=$deps")
editable_stamp=$(stamp "$(cat pyproject.toml)" "${pip_build[*]}")
if [ "$(cat .venv/.dmlgpu 2>/dev/null)" != "$editable_stamp" ] || ! "$py" -c "import dmlgpu.runtime._kompute, dmlgpu.runtime._host_copy, dmlgpu.runtime._glsl" 2>/dev/null; then
  say "building dmlgpu (CMake: shaders, and Kompute from the kp sdist, compiled by zig: minutes the first time)"
  "$py" -m pip install "${pip_quiet[@]}" "${pip_build[@]}" \
    -Ceditable.rebuild=true -Ceditable.verbose=false -e .
  echo "$editable_stamp" >.venv/.dmlgpu
fi

# The portable wheel, from the build tree that .venv's install left (seconds when nothing
# changed): packed by pip, tagged by auditwheel (which finds nothing to copy in: the Vulkan loader
# is opened at run time, zig linked its C++ runtime in), then checked by `auditwheel show`.
wheel() {
  local raw=$root/.cache/wheel show
  rm -rf "$raw"
  say "packing the dmlgpu wheel"
  "$py" -m pip wheel "${pip_quiet[@]}" "${pip_build[@]}" -w "$raw" .
  rm -f "$root"/dist/dmlgpu-*.whl
  PATH="$root/.venv/bin:$PATH" "$root/.venv/bin/auditwheel" repair --exclude libvulkan.so.1 \
    --plat "$MANYLINUX_PLATFORM" -w "$root/dist" "$raw"/dmlgpu-*.whl >"$raw/repair.log" 2>&1 \
    || { cat "$raw/repair.log" >&2; exit 1; }
  built=$(echo "$root"/dist/dmlgpu-*.whl)
  show=$("$root/.venv/bin/auditwheel" show "$built" 2>&1 | tr -s ' \n' '  ')
  if ! grep -Eq 'platform tag: "(manylinux_2_(1[0-9]|2[0-8])|manylinux2014)_x86_64"' <<<"$show"; then
    echo "$show" >&2
    echo "auditwheel does not accept $built as $MANYLINUX_PLATFORM or older" >&2
    exit 1
  fi
  say "$(basename "$built"): $(grep -Eo 'platform tag: "[^"]*"' <<<"$show")"
}

# The wheel as a user installs it: a fresh venv, pip with binaries only, no compiler on PATH
# (PATH is the venv's bin alone), dmlgpu's disk caches off; then tools/wheel_smoke.py.
smoke() {
  local fresh=$root/.cache/smoke-venv
  rm -rf "$fresh"
  python3 -m venv "$fresh"
  say "smoke test: $(basename "$built") in a fresh venv, no compiler on PATH"
  env PATH="$fresh/bin" DMLGPU_CACHE_DIR= "$fresh/bin/python" -m pip install "${pip_quiet[@]}" \
    --only-binary :all: "$built"
  (cd / && env PATH="$fresh/bin" DMLGPU_CACHE_DIR= "$fresh/bin/python" "$root/tools/wheel_smoke.py" "$root/README.md")
}

# 4. The job, run from / so that Python imports the installed package, never the source tree.
case "$job" in
  demo) cd / && exec "$py" -m dmlgpu demo "$@" ;;
  bench) cd / && exec "$py" -m dmlgpu bench "$@" ;;
  setup) cd / && say "ready: $("$py" -c 'import dmlgpu, sys; sys.stdout.write(dmlgpu.__file__)')" ;;
  wheel)
    wheel
    smoke
    say "built: $built (pip install it, with extras: pip install '$built[dask]')" ;;
  test)
    wheel
    smoke
    # The same wheel in a venv of its own where nothing but the wheel provides dmlgpu.
    wait "$test_venv_pid" || { cat "$test_venv_log" >&2; exit 1; }
    cat "$test_venv_log"
    tpy="$root/.cache/test-venv/bin/python"
    "$tpy" -m pip install "${pip_quiet[@]}" --no-deps --force-reinstall "$built"
    "$tpy" -m pip check >/dev/null
    cd /
    # Twice: as users run it, then under the Khronos validation layer, where any message the
    # layer reports fails the test that caused it (tests/conftest.py).
    # One pytest process per core, at most four (DMLGPU_TEST_WORKERS overrides; 0: one process):
    # most of a test's time is Python and lavapipe's pipeline builds on one core.
    workers=${DMLGPU_TEST_WORKERS:-$(nproc)}
    [ "$workers" -le 4 ] || workers=4
    pytest=("$tpy" -m pytest -c "$root/pyproject.toml" --rootdir "$root" -p no:cacheprovider --durations=25
            -n "$workers" "$root/tests")
    say "test suite ($("$tpy" -c 'import dmlgpu, sys; sys.stdout.write(dmlgpu.__file__)'), $workers processes)"
    "${pytest[@]}" "$@"
    say "test suite again, under the Khronos validation layer"
    log=$(mktemp -t dmlgpu-validation.XXXXXX)
    DMLGPU_VALIDATION=1 DMLGPU_VALIDATION_LOG="$log" "${pytest[@]}" "$@"
    # each worker logs to "$log.<worker>" (tests/conftest.py)
    for f in "$log" "$log".*; do
      [ ! -s "$f" ] || { echo "validation layer messages: $f" >&2; exit 1; }
    done
    rm -f "$log" "$log".* ;;
esac
