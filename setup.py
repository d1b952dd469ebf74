"""Builds vitcpp's extension module with CMake for pip and `python -m build` (pyproject.toml).

The module is the CMake target _vitcpp (python/CMakeLists.txt), built in build-python/ (or
in the CMake build folder VITCPP_CMAKE_BUILD_DIR names, e.g. build/ after scripts/test.sh,
which then only links it), for the interpreter that runs this, through ccache when it is
installed. Offline: everything comes from Debian's packages (scripts/setup.sh)."""
import os
import re
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(ROOT, "build-python")
os.makedirs(OUT, exist_ok=True)


def version():
    text = open(os.path.join(ROOT, "CMakeLists.txt")).read()
    return re.search(r"project\(vitcpp VERSION ([0-9.]+)", text).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.environ.get("VITCPP_CMAKE_BUILD_DIR") or OUT
        build = os.path.abspath(build)
        if shutil.which("ccache") and os.environ.get("VIT_CCACHE", "1") != "0":
            os.environ.setdefault("CCACHE_BASEDIR", ROOT)
            os.environ.setdefault("CCACHE_NOHASHDIR", "1")
        # A folder already configured (VITCPP_CMAKE_BUILD_DIR=build) is built as it is: its
        # Python must be this one's (checked below by the module's file name).
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            args = ["-DCMAKE_BUILD_TYPE=Release", "-DVIT_PYTHON=ON", f"-DPython_EXECUTABLE={sys.executable}",
                    "-DVIT_BUILD_TESTS=OFF", "-DVIT_BUILD_BENCH=OFF"]
            if "CCACHE_BASEDIR" in os.environ:
                args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build] + args)
        jobs = str(os.cpu_count() or 1)
        subprocess.check_call(["cmake", "--build", build, "--target", "_vitcpp", "-j", jobs])
        folder = os.path.join(build, "python", "vitcpp")
        name = "_vitcpp" + sysconfig.get_config_var("EXT_SUFFIX")
        if not os.path.exists(os.path.join(folder, name)):
            sys.exit(f"setup.py: no {name} in {folder}: pybind11-dev missing, or {build} is configured for "
                     f"another Python than {sys.executable}")
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(os.path.join(folder, name), dest)


setup(version=version(), ext_modules=[Extension("vitcpp._vitcpp", sources=[])], cmdclass={"build_ext": CMakeBuild},
      # setuptools' own files next to CMake's, not in the source tree or in CMake's build/
      options={"build": {"build_base": os.path.join(OUT, "setuptools")}, "egg_info": {"egg_base": OUT}})
