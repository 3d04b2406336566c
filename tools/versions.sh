# What dmlgpu's set-up installs; sourced by bootstrap.sh and the offline bundle scripts.
# shellcheck disable=SC2034

# Debian 12 packages: Vulkan loader + headers, lavapipe (mesa-vulkan-drivers), the Khronos
# validation layer, glslang and SPIRV-Tools for the shaders, and what kp's build needs.
APT_PACKAGES=(
  libvulkan1 libvulkan-dev mesa-vulkan-drivers vulkan-validationlayers
  glslang-tools spirv-tools
  libfmt-dev cmake make g++ patch
  python3-venv python3-dev
)

KP_VERSION=0.9.0
# pybind11 comes from PyPI, not Debian: Debian 12's pybind11 2.10 cannot build against numpy 2.
PIP_PACKAGES=(
  "numpy>=1.24"
  "pybind11==2.13.6"
  "setuptools>=68"
  "wheel"
  "pytest>=7.4"
  "hypothesis>=6.100"
  "dask[array]>=2024.1"  # dmlgpu.dask (the [dask] extra): tests/test_dask.py
  "distributed>=2024.1"
)
