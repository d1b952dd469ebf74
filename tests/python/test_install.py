"""The package installs as the README says, offline: into a venv made with
--system-site-packages (Debian's numpy) by pip --no-build-isolation, and as a wheel by
`python3 -m build --wheel --no-isolation`. VITCPP_CMAKE_BUILD_DIR points both at this build,
so they link the module from its objects instead of compiling the library again."""
import os
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def env():
    """No index (offline), no PYTHONPATH (the installed package, not the build's), and the
    CMake build the tests run in (the folder holding vit)."""
    e = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    e.pop("PYTHONPATH", None)
    if os.environ.get("VIT_BINARY"):
        e["VITCPP_CMAKE_BUILD_DIR"] = os.path.dirname(os.environ["VIT_BINARY"])
    return e


def test_pip_installs_into_a_venv_offline(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
    py = str(venv / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-build-isolation", ROOT], env=env(),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    code = ("import numpy as np, vitcpp; m = vitcpp.create_model('vit_tiny_patch16_224'); "
            "print(m(np.zeros((1, 3, 224, 224), np.float32)).shape, vitcpp.__file__)")
    r = subprocess.run([py, "-c", code], env=env(), capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    shape, where = r.stdout.split(") ")
    assert shape + ")" == "(1, 1000)" and where.strip().startswith(str(venv)), r.stdout


def test_a_wheel_builds_without_isolation(tmp_path):
    pytest.importorskip("build")
    r = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", tmp_path, ROOT],
                       env=env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    wheels = list(tmp_path.glob("vitcpp-*.whl"))
    assert len(wheels) == 1, os.listdir(tmp_path)
    names = zipfile.ZipFile(wheels[0]).namelist()
    for f in ("vitcpp/__init__.py", "vitcpp/data.py", "vitcpp/__init__.pyi", "vitcpp/py.typed"):
        assert f in names, names
    assert any(n.startswith("vitcpp/_vitcpp") and n.endswith(".so") for n in names), names
