"""Packaging hook: building dmlgpu runs the CMake preset that compiles and validates the SPIR-V,
and the modules travel inside the package (dmlgpu/spirv) so it runs from any directory."""
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithShaders(build_py):
    def run(self):
        super().run()
        subprocess.check_call(
            ["cmake", "--preset", "python", f"-DPython3_EXECUTABLE={sys.executable}"], cwd=ROOT)
        subprocess.check_call(["cmake", "--build", "--preset", "python", "--parallel"], cwd=ROOT)
        target = Path(self.build_lib) / "dmlgpu" / "spirv"
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        modules = sorted((ROOT / "build" / "python" / "spirv").glob("*.spv"))
        if not modules:
            raise RuntimeError("the shader build produced no SPIR-V")
        for module in modules:
            shutil.copy2(module, target)


setup(cmdclass={"build_py": BuildPyWithShaders})
