#!/usr/bin/env bash
# Assemble everything an offline Debian/Ubuntu x86-64 GPU host needs to build and test dmlgpu:
#
#   tools/offline_bundle.sh OUTDIR [PYTHON_VERSION]     # run on a machine with the registries
#   OUTDIR/offline_install.sh [demo|test|bench]          # run on the offline host
#
# OUTDIR gets: the project (src/), the kp sdist that dmlgpu's build compiles Kompute from,
# Debian packages with the Vulkan loader and headers, fmt, glslang, SPIRV-Tools and patch
# (unpacked into a private prefix there, never into /), GLVND packages for hosts that lack them
# (debs-glvnd/), and wheels for PYTHON_VERSION (default 3.12) of what building dmlgpu needs
# (scikit-build-core, pybind11, numpy, ninja) and of pytest and hypothesis.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/tools/versions.sh"
out=${1:?usage: tools/offline_bundle.sh OUTDIR [PYTHON_VERSION]}
pyver=${2:-3.12}
mkdir -p "$out"/{debs,wheels,src}
out=$(cd "$out" && pwd)

# The project as committed plus uncommitted edits, without ignored build products.
(cd "$root" && git ls-files -co --exclude-standard -z | xargs -0 tar cf - ) | tar xf - -C "$out/src"

python3 -m pip download -q --disable-pip-version-check --no-deps --no-binary kp \
  "kp==$KP_VERSION" -d "$out"
python3 -m pip download -q --disable-pip-version-check --only-binary=:all: \
  --python-version "$pyver" --implementation cp --platform manylinux2014_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 -d "$out/wheels" \
  "${BUILD_PIP_PACKAGES[@]}" "${TEST_PIP_PACKAGES[@]}"

(cd "$out/debs" && apt-get download libvulkan1 libvulkan-dev libfmt9 libfmt-dev glslang-tools glslang-dev \
  spirv-tools patch vulkan-validationlayers >/dev/null)
# NVIDIA's Vulkan driver (libGLX_nvidia) needs GLVND installed system-wide; containers often
# lack it. offline_install.sh never installs these itself; see its header.
mkdir -p "$out/debs-glvnd"
(cd "$out/debs-glvnd" && apt-get download libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2 >/dev/null)
cp "$root/tools/offline_install.sh" "$out/"
echo "bundle ready in $out ($(du -sh "$out" | cut -f1)); on the host run: $out/offline_install.sh test"
