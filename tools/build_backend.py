"""dmlgpu's build backend: scikit-build-core, once cmake is known to be there.

CMake checks everything else the build needs (cmake/prerequisites.cmake) but cannot report its
own absence, where scikit-build-core would stop with a traceback. One line naming the Debian
package instead, as CMake's check does for the rest. Building an sdist needs no cmake.
"""
import functools
import importlib.util
import shutil
import sys

from scikit_build_core import build as _skbuild
from scikit_build_core.build import *  # noqa: F401,F403  (every PEP 517 hook; some replaced below)


def _needs_cmake(hook):
    @functools.wraps(hook)
    def checked(*args, **kwargs):
        if shutil.which("cmake") is None and importlib.util.find_spec("cmake") is None:  # PyPI's cmake
            sys.exit("dmlgpu cannot be built, missing: cmake (Debian package cmake). "
                     "Install with: apt-get install cmake")
        return hook(*args, **kwargs)
    return checked


get_requires_for_build_wheel = _needs_cmake(_skbuild.get_requires_for_build_wheel)
get_requires_for_build_editable = _needs_cmake(_skbuild.get_requires_for_build_editable)
prepare_metadata_for_build_wheel = _needs_cmake(_skbuild.prepare_metadata_for_build_wheel)
prepare_metadata_for_build_editable = _needs_cmake(_skbuild.prepare_metadata_for_build_editable)
build_wheel = _needs_cmake(_skbuild.build_wheel)
build_editable = _needs_cmake(_skbuild.build_editable)
