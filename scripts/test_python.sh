#!/usr/bin/env bash
# The PyTorch package's tests: installs python/ (ops_transformer) into a virtual environment
# with what its tests need (torch, transformers, pytest, numpy from PyPI) and runs pytest.
# Usage: scripts/test_python.sh [BUILD_DIR]   (default build: its libot.so, built by
#        scripts/build.sh, is the library the package uses; nothing is compiled twice)
# Env:   PYTHON        interpreter that makes the venv (default python3)
#        OT_PY_VENV    the venv (default BUILD_DIR/py-venv); kept between runs, so torch
#                      (large) is downloaded once per build tree
#        OT_TORCH_SITE a site-packages directory that already holds torch: linked into the
#                      venv (a .pth file) instead of downloading torch
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bdir=${1:-build}
lib="$root/$bdir/libot.so"
[ -e "$lib" ] || { echo "test_python: $lib not found: run scripts/build.sh $bdir first" >&2; exit 1; }
venv=${OT_PY_VENV:-$bdir/py-venv}
if [ ! -x "$venv/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$venv"
fi
py="$root/$venv/bin/python"
[ -x "$py" ] || py="$venv/bin/python"
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if [ -n "${OT_TORCH_SITE:-}" ]; then
  echo "$OT_TORCH_SITE" > "$site/ot_torch_site.pth"
fi
need=()
for m in torch transformers pytest numpy; do
  "$py" -c "import $m" 2>/dev/null || need+=("$m")
done
# setuptools >= 70.1 builds wheels by itself (a venv's bundled one may be older)
"$py" -c "import setuptools, sys; sys.exit(tuple(map(int, setuptools.__version__.split('.')[:2])) < (70, 1))" \
  2>/dev/null || need+=("setuptools>=70.1")
if [ ${#need[@]} -gt 0 ]; then
  echo "test_python: installing ${need[*]} into $venv (PyPI)"
  "$py" -m pip install -q --disable-pip-version-check "${need[@]}"
fi
# the package against the build tree's library (OT_LIBRARY: setup.py records it, builds nothing)
OT_LIBRARY="$lib" "$py" -m pip install -q --disable-pip-version-check --no-build-isolation \
  --no-deps --force-reinstall ./python
# run from the build tree so `import ops_transformer` is the installed package
cd "$root/$bdir"
set +e
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$py" -m pytest -q -p no:cacheprovider "$root/python/tests"
rc=$?
set -e
if [ $rc -eq 5 ]; then
  echo "test_python: pytest collected no tests: that is a failure" >&2
  exit 1
fi
exit $rc
