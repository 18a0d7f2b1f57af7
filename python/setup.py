"""Builds or locates libot.so for the ops_transformer package.

Order (first that applies):
  1. OT_LIBRARY=/path/to/libot.so   use that file (recorded; nothing is built)
  2. OT_PREFIX=/opt/ot or `pkg-config ot` finds an installed libot: use it (recorded)
  3. otherwise build the shared library with the repository's CMake (target ot_shared,
     build directory OT_BUILD_DIR, default <repo>/build-python) and copy it into the package.
Needs only what scripts/setup.sh installs (cmake, a C compiler, oneDNN, OpenMP, MPI).
"""
import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def _pkg_config_libdir():
    env = dict(os.environ)
    prefix = env.get("OT_PREFIX")
    if prefix:
        env["PKG_CONFIG_PATH"] = os.pathsep.join(
            [str(Path(prefix) / "lib" / "pkgconfig"), env.get("PKG_CONFIG_PATH", "")])
    try:
        out = subprocess.run(["pkg-config", "--variable=libdir", "ot"], env=env,
                             capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    lib = Path(out) / "libot.so"
    return lib if lib.exists() else None


def _build_libot():
    if not (REPO / "CMakeLists.txt").exists():
        raise SystemExit(
            "ops_transformer: libot not found and no repository to build it from: set "
            "OT_LIBRARY=/path/to/libot.so or OT_PREFIX=<install prefix> (see README 'Use as a C library')")
    bdir = Path(os.environ.get("OT_BUILD_DIR", REPO / "build-python"))
    jobs = str(os.cpu_count() or 1)
    subprocess.run(["cmake", "-S", str(REPO), "-B", str(bdir), "-DCMAKE_BUILD_TYPE=Release"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(bdir), "--target", "ot_shared", "-j", jobs], check=True)
    lib = bdir / "libot.so"
    if not lib.exists():
        raise SystemExit(f"ops_transformer: the build did not produce {lib}")
    return lib.resolve()


class BuildPy(build_py):
    def run(self):
        super().run()
        pkg = Path(self.build_lib) / "ops_transformer"
        recorded = None
        if os.environ.get("OT_LIBRARY"):
            recorded = Path(os.environ["OT_LIBRARY"]).resolve()
            if not recorded.exists():
                raise SystemExit(f"ops_transformer: OT_LIBRARY={recorded} does not exist")
        else:
            recorded = _pkg_config_libdir()
        bundled = pkg / "libot.so"
        if recorded is None:
            shutil.copy2(_build_libot(), bundled)
        elif bundled.exists():      # left in the build directory by an earlier install
            bundled.unlink()
        (pkg / "_build_config.py").write_text(
            "# written by setup.py: the libot this package was installed against\n"
            f"LIBRARY = {str(recorded) if recorded else None!r}\n")


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPy}, distclass=BinaryDistribution)
