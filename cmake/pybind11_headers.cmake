# pybind11's headers, compiled from a copy in the build tree. pip's isolated build (a plain
# `pip install .`) installs pybind11 into a new temporary folder every time, and compile lines
# that named that folder would recompile every extension module in a build tree kept across
# builds (pyproject.toml's build-dir: `pip install .[dask]` after `pip install .`).
# tests/test_packaging.py configures a small project with it and reads its compile lines.

# After find_package(pybind11 CONFIG): copies pybind11's headers into `folder` (a header only
# where it changed) and makes pybind11's targets name the copy. Its config package makes
# pybind11::headers link pybind11::pybind11_headers, which carries the folder too: both do.
function(dmlgpu_pybind11_headers_in folder)
  file(GLOB_RECURSE headers RELATIVE ${pybind11_INCLUDE_DIR} ${pybind11_INCLUDE_DIR}/pybind11/*.h)
  foreach(header IN LISTS headers)
    get_filename_component(parent ${folder}/${header} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(COPY_FILE ${pybind11_INCLUDE_DIR}/${header} ${folder}/${header} ONLY_IF_DIFFERENT)
  endforeach()
  foreach(target pybind11::headers pybind11::pybind11_headers)
    if(TARGET ${target})
      set_property(TARGET ${target} PROPERTY INTERFACE_INCLUDE_DIRECTORIES ${folder})
    endif()
  endforeach()
endfunction()
