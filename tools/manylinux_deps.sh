#!/usr/bin/env bash
# glslang and fmt for the manylinux preset, compiled by zig for glibc 2.28 (cmake/manylinux_2_28.cmake),
# with a copy of the Vulkan headers, into one prefix under $DMLGPU_BUILD_CACHE/manylinux (bootstrap.sh
# names a folder per user; .cache in the clone without it); prints the prefix.
#
#   tools/manylinux_deps.sh PYTHON     # PYTHON: the interpreter whose environment has ziglang
#
# The sources are Debian's source packages' upstream tarballs (tools/versions.sh pins each with its
# sha256): on Debian fetched with `apt-get source` through a private apt configuration (the
# system's apt sources are left alone); elsewhere, Ubuntu included (its apt lacks Debian's archive
# keys), downloaded from the same place in Debian's archive (deb.debian.org's pool); or taken from
# DMLGPU_GLSLANG_TARBALL / DMLGPU_FMTLIB_TARBALL. Debian is os-release's ID=debian
# (DMLGPU_OS_RELEASE names another os-release file, as for tools/bootstrap.sh). ninja must be on
# PATH (tools/bootstrap.sh puts .venv/bin first). The prefix
# is named by everything it is made from (zig, the target, the pins, the headers, this script), so a second run prints it within a second.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=tools/versions.sh
source "$root/tools/versions.sh"
python=${1:?usage: tools/manylinux_deps.sh PYTHON}
say() { printf '\033[1m[manylinux deps]\033[0m %s\n' "$*" >&2; }
cache=${DMLGPU_BUILD_CACHE:-$root/.cache}/manylinux
export ZIG_GLOBAL_CACHE_DIR=${ZIG_GLOBAL_CACHE_DIR:-${DMLGPU_BUILD_CACHE:-$root/.cache}/zig}
export ZIG_LOCAL_CACHE_DIR=$ZIG_GLOBAL_CACHE_DIR
toolchain=$root/cmake/manylinux_2_28.cmake

zig_version=$("$python" -c 'import ziglang, os, subprocess; print(subprocess.run([os.path.join(os.path.dirname(ziglang.__file__), "zig"), "version"], capture_output=True, text=True, check=True).stdout.strip())') || {
  echo "tools/manylinux_deps.sh: no ziglang in $python's environment (pip install ziglang==$ZIGLANG_VERSION)" >&2; exit 1; }
vulkan_h=/usr/include/vulkan/vulkan_core.h
[ -f "$vulkan_h" ] || { echo "tools/manylinux_deps.sh: the Vulkan headers are missing ($vulkan_h)" >&2; exit 1; }
vulkan_version=$(sed -n 's/^#define VK_HEADER_VERSION \([0-9]*\)$/\1/p' "$vulkan_h")
# The toolchain file's target and compiler flags (not its lines about dmlgpu's own build).
target=$(grep -E '^set\(DMLGPU_ZIG_TARGET|target_flag " ' "$toolchain")
key=$(printf '%s\n' "$zig_version" "$target" "${GLSLANG_SOURCE[*]}" "${FMT_SOURCE[*]}" "$vulkan_version" \
        "$(cat "$0")" | sha256sum | cut -c1-16)
prefix=$cache/deps-$key
if [ -f "$prefix/.complete" ]; then
  echo "$prefix"; exit 0
fi
# One build per prefix: a second clone that asks meanwhile waits for it, then takes it.
mkdir -p "$cache"
exec 9>"$cache/.lock-$key"
flock 9
if [ -f "$prefix/.complete" ]; then
  echo "$prefix"; exit 0
fi

# 1. The sources: a verified tarball in .cache/manylinux/sources, else fetched.
sources=$cache/sources
mkdir -p "$sources"
os_id=$(sed -n 's/^ID=//p' "${DMLGPU_OS_RELEASE:-/etc/os-release}" 2>/dev/null | tr -d '"')
# fetch runs in $( ), where errexit does not apply: each step that fails stops it with fetch_failed.
fetch_failed() { echo "tools/manylinux_deps.sh: $* (see above)" >&2; exit 1; }
fetch() {  # fetch NAME VERSION SUITE TARBALL SHA256: the tarball's path once verified
  local name=$1 version=$2 suite=$3 tarball=$4 sha=$5 override apt
  override=DMLGPU_$(tr '[:lower:]' '[:upper:]' <<<"$name")_TARBALL
  if [ -n "${!override:-}" ]; then
    cp "${!override}" "$sources/$tarball.part" && mv "$sources/$tarball.part" "$sources/$tarball" \
      || fetch_failed "could not copy $override (${!override})"
  elif ! echo "$sha  $sources/$tarball" | sha256sum -c --status 2>/dev/null; then
    if [ "$os_id" != debian ] || ! command -v apt-get >/dev/null; then
      # Not Debian (Ubuntu's apt lacks Debian's archive keys; Fedora, Arch and openSUSE have no
      # apt): the same file from Debian's archive, where apt would fetch it.
      local url="https://deb.debian.org/debian/pool/main/${name:0:1}/$name/${tarball//+/%2b}"
      say "downloading $url"
      "$python" -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' \
        "$url" "$sources/$tarball.part" && mv "$sources/$tarball.part" "$sources/$tarball" \
        || fetch_failed "could not download $url"
    else
      say "fetching Debian's $name $version source package ($suite)"
      apt=$cache/apt
      mkdir -p "$apt/lists/partial" "$apt/parts"
      printf 'deb-src http://deb.debian.org/debian %s main\n' bookworm trixie >"$apt/sources.list"
      local options=(-o "Dir::Etc::SourceList=$apt/sources.list" -o "Dir::Etc::SourceParts=$apt/parts"
                     -o "Dir::State::Lists=$apt/lists" -o "APT::Sandbox::User=root" -qq)
      apt-cache "${options[@]}" showsrc "$name" 2>/dev/null | grep -qx "Version: $version" \
        || apt-get "${options[@]}" update >/dev/null \
        || fetch_failed "apt-get update of Debian's deb-src lists ($apt/sources.list) failed"
      (cd "$sources" && apt-get "${options[@]}" source --download-only "$name=$version" >/dev/null) \
        || fetch_failed "apt-get source --download-only $name=$version failed"
    fi
  fi
  echo "$sha  $sources/$tarball" | sha256sum -c --status || {
    echo "tools/manylinux_deps.sh: $sources/$tarball is not $name $version (sha256 differs from tools/versions.sh)" >&2
    exit 1; }
  echo "$sources/$tarball"
}
glslang_tarball=$(fetch "${GLSLANG_SOURCE[@]}")
fmt_tarball=$(fetch "${FMT_SOURCE[@]}")

# 2. Built for the target, installed into a fresh prefix that is named only once complete.
work=$cache/work-$key
rm -rf "$work" "$prefix"
mkdir -p "$work/src" "$prefix.part/include"
tar xf "$glslang_tarball" -C "$work/src"
tar xf "$fmt_tarball" -C "$work/src"
build() {  # build SOURCE_DIR CMAKE_ARGS...: configure, compile and install into the prefix
  local src=$1; shift
  say "building $(basename "$src") for ${MANYLINUX_PLATFORM} (zig $zig_version)"
  cmake -S "$src" -B "$work/build-$(basename "$src")" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DPython3_EXECUTABLE="$python" \
    -DCMAKE_INSTALL_PREFIX="$prefix.part" -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DCMAKE_CXX_VISIBILITY_PRESET=hidden -DCMAKE_VISIBILITY_INLINES_HIDDEN=ON -DBUILD_SHARED_LIBS=OFF \
    "$@" >"$work/$(basename "$src").log" 2>&1 \
  && cmake --build "$work/build-$(basename "$src")" >>"$work/$(basename "$src").log" 2>&1 \
  && cmake --install "$work/build-$(basename "$src")" >>"$work/$(basename "$src").log" 2>&1 \
  || { tail -40 "$work/$(basename "$src").log" >&2; exit 1; }
}
build "$work/src/fmtlib-"* -DFMT_DOC=OFF -DFMT_TEST=OFF -DFMT_INSTALL=ON
# No optimizer (dmlgpu.runtime._glsl leaves optimisation to the driver), so no SPIRV-Tools; no HLSL, no tools.
build "$work/src/glslang-"* -DENABLE_OPT=OFF -DENABLE_HLSL=OFF -DENABLE_GLSLANG_BINARIES=OFF \
  -DENABLE_SPVREMAPPER=OFF -DGLSLANG_TESTS=OFF -DGLSLANG_ENABLE_INSTALL=ON
cp -r /usr/include/vulkan "$prefix.part/include/"
[ ! -d /usr/include/vk_video ] || cp -r /usr/include/vk_video "$prefix.part/include/"
touch "$prefix.part/.complete"
mv "$prefix.part" "$prefix"
rm -rf "$work"
echo "$prefix"
