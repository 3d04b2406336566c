# What dmlgpu's set-up installs; sourced by bootstrap.sh and the offline bundle scripts.
# shellcheck disable=SC2034

# Debian 12 packages: Vulkan loader + headers, the Khronos validation layer, glslang and
# SPIRV-Tools for the shaders (glslang's library is also built into dmlgpu._glsl), and what the
# Kompute build needs (cmake/prerequisites.cmake names the same packages when one is missing).
APT_PACKAGES=(
  libvulkan1 libvulkan-dev vulkan-validationlayers
  glslang-tools glslang-dev spirv-tools
  libfmt-dev cmake make g++ patch
  python3-venv python3-dev
)

# lavapipe (Mesa's Vulkan driver on the CPU), from Debian 12's backports: Mesa 25's llvmpipe
# loads storage buffers 4.6x faster than Debian 12's own Mesa 22.3, which loads them lane by
# lane, and every kernel reads memory (benchmarks/NOTES.md, lavapipe L12). Elsewhere than
# Debian 12 the distribution's own package is installed.
LAVAPIPE_PACKAGE=mesa-vulkan-drivers
LAVAPIPE_SUITE=bookworm-backports
LAVAPIPE_MIN_VERSION=25

# The kp sdist that dmlgpu._kompute is built from (third_party/kompute/CMakeLists.txt pins it
# with its sha256); the offline bundle carries a copy.
KP_VERSION=0.9.0
# Python packages for building dmlgpu without build isolation: pyproject.toml's
# build-system.requires, plus ninja, which scikit-build-core would otherwise fetch itself.
# pybind11 comes from PyPI, not Debian: Debian 12's pybind11 2.10 cannot build against numpy 2.
BUILD_PIP_PACKAGES=(
  "scikit-build-core>=1.1"
  "pybind11==2.13.6"
  "numpy>=1.24"
  "ninja"
)
TEST_PIP_PACKAGES=(
  "mypy>=1.8"  # tests/test_typing.py: mypy --strict on a script calling every front-end function
  "pytest>=7.4"
  "hypothesis>=6.100"
  "dask[array]>=2024.1"  # dmlgpu.dask (the [dask] extra): tests/dask/test_dask.py
  "distributed>=2024.1"
  # tests/test_docs.py: the documentation site, `mkdocs build --strict` (mkdocs.yml), its API
  # reference read from the docstrings by mkdocstrings; pinned, as a new release may warn anew.
  "mkdocs==1.6.1"
  "mkdocstrings[python]==1.0.8"
  "mkdocstrings-python==2.0.11"
)
