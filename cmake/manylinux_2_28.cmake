# The manylinux preset's toolchain: zig's clang (PyPI's ziglang) compiling for x86_64-linux-gnu.2.28,
# so that the extension modules need glibc 2.28 or newer and its libgcc_s.so.1 (the unwinder, below)
# and nothing else of the system (zig links its libc++ in statically). zig ships the glibc 2.28
# headers and link stubs itself: no sysroot to download, and the build host's glibc (2.36 on
# Debian 12) never leaks in.
# glslang and fmt come from DMLGPU_MANYLINUX_PREFIX, built for the same target by
# tools/build_wheel.sh, with a copy of the Vulkan headers (headers only: the loader is opened at
# run time, dmlgpu/runtime/vulkan_loader.py).
#
# Read by every CMake project it configures, try_compile's too: those get the wrappers' folder
# through CMAKE_TRY_COMPILE_PLATFORM_VARIABLES and write nothing.
set(DMLGPU_ZIG_TARGET x86_64-linux-gnu.2.28)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
if(NOT DMLGPU_ZIG_WRAPPERS)
  set(python ${Python3_EXECUTABLE})
  if(NOT python)
    set(python ${Python_EXECUTABLE})
  endif()
  if(NOT python)
    find_program(python NAMES python3 python REQUIRED)
  endif()
  execute_process(
    COMMAND ${python} -c "import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), 'zig'))"
    OUTPUT_VARIABLE zig OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc ERROR_QUIET)
  if(NOT rc EQUAL 0 OR NOT EXISTS "${zig}")
    message(FATAL_ERROR "dmlgpu cannot be built, missing: zig (pip install ziglang, into ${python}'s environment)")
  endif()
  # zig's cache of compiled objects and of its libc++ for this target (minutes to build once):
  # ZIG_GLOBAL_CACHE_DIR when first configured, kept for every later build of this tree.
  set(DMLGPU_ZIG_CACHE "$ENV{ZIG_GLOBAL_CACHE_DIR}" CACHE PATH "zig's cache folder (empty: zig's default)")
  set(environment "")
  if(DMLGPU_ZIG_CACHE)
    set(environment "ZIG_GLOBAL_CACHE_DIR='${DMLGPU_ZIG_CACHE}' ZIG_LOCAL_CACHE_DIR='${DMLGPU_ZIG_CACHE}' ")
  endif()
  set(DMLGPU_ZIG_WRAPPERS ${CMAKE_BINARY_DIR}/zig)
  foreach(tool cc c++ ar ranlib)
    set(target_flag "")
    if(tool MATCHES "^c")
      set(target_flag " -target ${DMLGPU_ZIG_TARGET}")
    endif()
    file(CONFIGURE OUTPUT ${DMLGPU_ZIG_WRAPPERS}/${tool}
         CONTENT "#!/bin/sh\n${environment}exec '${zig}' ${tool}${target_flag} \"$@\"\n")
    file(CHMOD ${DMLGPU_ZIG_WRAPPERS}/${tool} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
         GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  endforeach()
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES DMLGPU_ZIG_WRAPPERS)
set(CMAKE_C_COMPILER ${DMLGPU_ZIG_WRAPPERS}/cc)
set(CMAKE_CXX_COMPILER ${DMLGPU_ZIG_WRAPPERS}/c++)
set(CMAKE_AR ${DMLGPU_ZIG_WRAPPERS}/ar CACHE FILEPATH "" FORCE)
set(CMAKE_RANLIB ${DMLGPU_ZIG_WRAPPERS}/ranlib CACHE FILEPATH "" FORCE)

# The unwinder: the system's libgcc_s.so.1, not the LLVM libunwind that zig links in with libc++.
# glibc ends a thread (pthread_exit: CPython's end of a daemon thread that takes the GIL back while
# the interpreter finalizes) with a forced unwind run by libgcc_s, which calls each frame's
# personality routine; the one in zig's libc++abi, bound to a libunwind of its own inside the
# module, would read libgcc_s's unwind context as libunwind's and jump through garbage (SIGSEGV at
# exit where a daemon thread was in a native copy). With libgcc_s.so.1 linked first, every _Unwind_
# function binds to it (the linker then takes nothing from zig's libunwind): one unwinder in the
# process, as with the system's compilers. glibc itself loads libgcc_s.so.1 for pthread_exit, and
# every manylinux policy allows it.
find_file(DMLGPU_UNWINDER libgcc_s.so.1 PATHS /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /usr/lib64 /lib64
          /usr/lib /lib NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
if(NOT DMLGPU_UNWINDER)
  message(FATAL_ERROR "dmlgpu's manylinux build needs the system's libgcc_s.so.1 (installed with glibc's compiler runtime: libgcc-s1, libgcc)")
endif()

if(DMLGPU_MANYLINUX_PREFIX)
  list(PREPEND CMAKE_PREFIX_PATH ${DMLGPU_MANYLINUX_PREFIX})
  # Kompute's find_package(Vulkan): the copied headers, never /usr/include (the build host's
  # glibc headers are there).
  set(Vulkan_INCLUDE_DIR ${DMLGPU_MANYLINUX_PREFIX}/include CACHE PATH "")
endif()
# FindVulkan also insists on a loader library, which zig's target does not search for. The modules
# never link it (third_party/kompute/CMakeLists.txt): the build host's, if any, or a name, is enough.
set(loader "libvulkan.so (not linked)")
foreach(folder /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib)
  if(EXISTS ${folder}/libvulkan.so)
    set(loader ${folder}/libvulkan.so)
    break()
  endif()
endforeach()
if(NOT Vulkan_LIBRARY)  # unset, or NOTFOUND from an earlier configure
  set(Vulkan_LIBRARY ${loader} CACHE FILEPATH "" FORCE)
endif()
