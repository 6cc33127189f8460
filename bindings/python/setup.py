"""Builds the C side of squall with the package.

`pip install ./bindings/python` runs cmake on the repository root (two
directories up) and bundles libsquall.so, squall-broker and squall-governor
into squall/_bin, where the package looks first. With $SQUALL_BUILD_DIR set
to an existing cmake build directory, its binaries are bundled instead of
building again. Build dependencies are those of squall itself (a C11
compiler, cmake, libzmq, czmq, msgpack-c: scripts/setup.sh).
"""
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py as _build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TARGETS = {"client/libsquall.so": "libsquall.so",
           "broker/squall-broker": "squall-broker",
           "governor/squall-governor": "squall-governor"}


def _have_all(build):
    return all(os.path.exists(os.path.join(build, src)) for src in TARGETS)


def _cmake_build(build):
    base = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
            "-DBUILD_TESTING=OFF"]
    if subprocess.call(base) != 0:
        # the dashboard needs libmicrohttpd; the Python package does not
        subprocess.check_call(base + ["-DSQUALL_HTTP=OFF"])
    jobs = str(os.cpu_count() or 2)
    subprocess.check_call(["cmake", "--build", build, "-j", jobs, "--target",
                           "squall", "squall-broker", "squall-governor"])


class build_py(_build_py):
    def run(self):
        super().run()
        build = os.environ.get("SQUALL_BUILD_DIR")
        if not build or not _have_all(build):
            if not os.path.exists(os.path.join(ROOT, "CMakeLists.txt")):
                sys.exit("squall: cannot find the C sources at %s; set SQUALL_BUILD_DIR "
                         "to a cmake build directory of squall" % ROOT)
            build = os.path.abspath(os.path.join(self.build_temp if hasattr(self, "build_temp")
                                                 else "build", "squall-cmake"))
            _cmake_build(build)
        target = os.path.join(self.build_lib, "squall", "_bin")
        os.makedirs(target, exist_ok=True)
        for src, name in TARGETS.items():
            # copies the file a symlink points to (libsquall.so -> .so.0.1.0)
            shutil.copy2(os.path.realpath(os.path.join(build, src)), os.path.join(target, name))


class BinaryDistribution(Distribution):
    """The wheel holds native binaries: tag it for this platform."""

    def has_ext_modules(self):
        return True


build_py.build_temp = os.path.join(HERE, "build", "temp")
setup(cmdclass={"build_py": build_py}, distclass=BinaryDistribution)
