"""An installed (non-editable) torchgrade finds its templates, checks, stubs and solutions."""

import os
import subprocess
import sys
import zipfile

import pytest

from conftest import REPO, SOLUTIONS


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    root = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(root),
                    str(REPO)], check=True, capture_output=True, timeout=600)
    wheel = next(root.glob("torchgrade-*.whl"))
    site = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(site), str(wheel)], check=True, capture_output=True, timeout=600)
    return wheel, site


def test_wheel_ships_package_data(installed):
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("grader/templates/report.html.j2", "grader/templates/style.css",
                     "grader/worker/zygote.py", "grader/probes/tracing.py",
                     "grader/checking/checks.ini",
                     # the shipped curriculum, a course folder
                     "grader/curriculum/course.toml", "grader/curriculum/exercises/__init__.py",
                     "grader/curriculum/checks/test_strides_broadcasting.py",
                     "grader/curriculum/exercises/strides_broadcasting.py",
                     "grader/curriculum/solutions/strides_broadcasting.py",
                     "grader/curriculum/samples/cleo_mistakes/strides_broadcasting.py",
                     "grader/curriculum/mutants/parameters/mlp_final_layer_created_in_forward.diff",
                     # bug hunts: the catalogue, both versions of each script, their checks
                     "grader/curriculum/faults.toml",
                     "grader/curriculum/exercises/bughunt/regression.py",
                     "grader/curriculum/solutions/bughunt/regression.py",
                     "grader/curriculum/probes/bughunt.py",
                     "grader/curriculum/checks/test_bughunt_regression_hidden.py"):
        assert required in names, required
    assert not any(n.startswith(("tests/", "grader/tests/")) for n in names)


def test_installed_package_grades_and_renders_a_report(installed, tmp_path):
    _, site = installed
    env = {**os.environ, "PYTHONPATH": str(site)}
    probe = subprocess.run([sys.executable, "-c", "import grader; print(grader.__file__)"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, check=True)
    assert probe.stdout.startswith(str(site))
    proc = subprocess.run([sys.executable, "-m", "grader.cli", "check",
                           str(SOLUTIONS / "strides_broadcasting.py"),
                           "--out", str(tmp_path / "o")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    html = (tmp_path / "o" / "strides_broadcasting" / "report.html").read_text()  # one per exercise
    assert 'Feedback for <span class="student">strides_broadcasting</span>' in html
    assert "Every check passed" in html
