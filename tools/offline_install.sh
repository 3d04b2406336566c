#!/usr/bin/env bash
# Install dmlgpu on an offline GPU host from a bundle made by tools/offline_bundle.sh, then run
# a job (demo | test | bench | setup). Nothing is installed into /: the Debian packages are
# unpacked into BUNDLE/prefix and the Python side lives in BUNDLE/src/.venv, which sees the
# host's own Python packages (numpy, PyTorch, CuPy) behind its own (a .pth file).
#
# dmlgpu is built as everywhere else (pip install: scikit-build-core, with Kompute from the
# bundle's kp sdist). The host needs python3 (with venv), cmake, g++ and the GPU's Vulkan
# driver. If the loader finds no driver, point it at the ICD: e.g. for NVIDIA
#   export VK_DRIVER_FILES=/usr/share/vulkan/icd.d/nvidia_icd.json
# If `VK_LOADER_DEBUG=driver` then says "Could not get 'vkCreateInstance' via
# 'vk_icdGetInstanceProcAddr' for ICD libGLX_nvidia.so.0", the host lacks GLVND, which NVIDIA's
# driver needs system-wide: as root, `dpkg -i BUNDLE/debs-glvnd/*.deb` (in a throw-away
# container, `for f in BUNDLE/debs-glvnd/*.deb; do dpkg -x "$f" /; done; ldconfig`).
set -euo pipefail
bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
job=${1:-test}
shift || true
prefix="$bundle/prefix"
if [ ! -e "$prefix/.unpacked" ]; then
  mkdir -p "$prefix"
  for deb in "$bundle"/debs/*.deb; do dpkg -x "$deb" "$prefix"; done
  touch "$prefix/.unpacked"
fi
export PATH="$prefix/usr/bin:$PATH"
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CMAKE_PREFIX_PATH="$prefix/usr"
export VK_LAYER_PATH="$prefix/usr/share/vulkan/explicit_layer.d"

src="$bundle/src"
py="$src/.venv/bin/python"
if [ ! -x "$py" ]; then
  python3 -m venv "$src/.venv"
  # The host's packages (numpy, PyTorch, CuPy) stay visible behind ours, also when the host's
  # python3 is itself a virtual environment (which --system-site-packages would skip).
  python3 -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' \
    >"$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-host-site.pth"
fi
source "$src/tools/versions.sh"
"$py" -m pip install -q --no-index --find-links "$bundle/wheels" "${BUILD_PIP_PACKAGES[@]}" \
  "${TEST_PIP_PACKAGES[@]}"
# Quick when nothing changed: the build tree (src/build/<wheel tag>) is kept.
DMLGPU_KP_SDIST=$(ls "$bundle"/kp-*.tar.gz) \
  "$py" -m pip install -q --no-index --no-build-isolation --no-deps --force-reinstall \
  "-Cbuild-dir=build/{wheel_tag}" "$src"
cd /
case "$job" in
  demo) exec "$py" -m dmlgpu demo "$@" ;;
  bench) exec "$py" -m dmlgpu bench "$@" ;;
  test) exec "$src/.venv/bin/python" -m pytest -c "$src/pyproject.toml" --rootdir "$src" "$src/tests" "$@" ;;
  setup) echo "ready" ;;
esac
