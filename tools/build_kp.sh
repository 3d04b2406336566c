#!/usr/bin/env bash
# Build a kp wheel from the PyPI sdist with our patches, using system Vulkan headers and fmt and
# the given Python's pybind11 (nothing is cloned from the network).
#
#   tools/build_kp.sh PYTHON WHEEL_DIR [SDIST]
#
# SDIST defaults to a fresh `pip download` of kp==$KP_VERSION. CMAKE_PREFIX_PATH may point at an
# unpacked prefix holding the Vulkan and fmt development files (the offline install does this).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/tools/versions.sh"
py=$1 wheel_dir=$2 sdist=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ -z "$sdist" ]; then
  "$py" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "kp==$KP_VERSION" -d "$work"
  sdist=$(ls "$work"/kp-*.tar.gz)
fi
tar xzf "$sdist" -C "$work"
src="$work/kp-$KP_VERSION"
for p in "$root"/third_party/kompute/patches/*.patch; do
  patch -s -p1 -d "$src" <"$p"
done

export KOMPUTE_OPT_USE_BUILT_IN_VULKAN_HEADER=OFF KOMPUTE_OPT_USE_BUILT_IN_FMT=OFF \
  KOMPUTE_OPT_USE_BUILT_IN_PYBIND11=OFF KOMPUTE_OPT_DISABLE_VULKAN_VERSION_CHECK=ON \
  KOMPUTE_OPT_INSTALL=OFF KOMPUTE_OPT_DISABLE_VK_DEBUG_LAYERS=ON \
  KOMPUTE_PYTHON_NUM_PARALLEL_THREADS=$(nproc)
pybind11_DIR=$("$py" -c "import pybind11; print(pybind11.get_cmake_dir())")
export pybind11_DIR
mkdir -p "$wheel_dir"
"$py" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w "$wheel_dir" "$src"
