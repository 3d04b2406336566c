# Kompute's CMakeLists.txt calls find_package(PythonLibs REQUIRED) and links ${PYTHON_LIBRARIES}
# into the bindings. An extension module must not link libpython, so this stand-in (found first
# on CMAKE_MODULE_PATH) gives it the headers of the Python that dmlgpu builds for and no library.
set(PYTHONLIBS_FOUND TRUE)
set(PythonLibs_FOUND TRUE)
set(PYTHON_INCLUDE_DIRS ${Python3_INCLUDE_DIRS})
set(PYTHON_INCLUDE_PATH ${Python3_INCLUDE_DIRS})
set(PYTHON_LIBRARIES "")
