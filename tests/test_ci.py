""".ci/run: it runs the README's two commands, one step a line, stops at the first step that
fails, and fails when a Debian package the suite needs is missing (its tests would skip and CI
would be green over a part of the suite).

The script itself is never run here (it deletes .venv and runs the whole suite): a copy of it
runs in a scratch folder against stand-ins (`python3`, `apt-get`, `chromium`, `bwrap` and the
virtual environment's programs) that log their calls.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

CI = REPO / ".ci" / "run"


def readme_commands() -> list[str]:
    """The commands of the README's "Two commands": its first two bash blocks (the third,
    the fast tier, is for working on the grader)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Two commands\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [line.strip() for block in blocks[:2] for line in block.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def ci_lines() -> list[str]:
    return [line.strip() for line in CI.read_text(encoding="utf-8").splitlines()
            if line.strip() and not line.strip().startswith("#")]


@pytest.mark.fast
def test_ci_runs_the_readme_commands_one_step_a_line_in_order():
    """Each step of the README's commands (`a && b && c`: three steps) is a line of .ci/run,
    as it is written, in the README's order: a step inside an `&&` list that fails does not
    stop a `set -e` script."""
    steps = [step.strip() for command in readme_commands() for step in command.split(" && ")]
    assert len(steps) == 4, steps  # venv, pip install, demo; pytest
    lines = ci_lines()
    assert "set -euo pipefail" in lines
    at = [lines.index(step) if step in lines else -1 for step in steps]
    assert -1 not in at, f".ci/run lacks the README's step {steps[at.index(-1)]!r}"
    assert at == sorted(at), "the README's steps run in another order in .ci/run"
    assert not [line for line in lines if "&&" in line]


# --------------------------------------------------------------------------- the harness

STAND_IN = """#!/bin/bash
echo "{name} $*" >> "$LOG"
{body}
"""
# `python3 -m venv .venv` makes a virtual environment of stand-ins, each failing when
# $FAIL names it.
VENV = """mkdir -p .venv/bin
for tool in pip torchgrade ruff mypy python; do
    printf '#!/bin/bash\\necho "%s $*" >> "$LOG"\\n[ "$FAIL" != "%s" ]\\n' "$tool" "$tool" \\
        > .venv/bin/$tool
    chmod +x .venv/bin/$tool
done
"""


def harness(tmp_path: Path, *, have: set[str], install: bool = True, bwrap_ok: bool = True,
            fail: str = "") -> tuple[subprocess.CompletedProcess, list[str]]:
    """Run a copy of .ci/run where the programs of `have` are on PATH (`install`: apt-get
    installs what it is asked for), with the stand-in `fail` failing; its result and the
    programs it called, in order."""
    root = tmp_path / "checkout"
    (root / ".ci").mkdir(parents=True)
    shutil.copy(CI, root / ".ci" / "run")
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    for tool in ("dirname", "rm", "mkdir", "chmod", "cat"):
        (bin_ / tool).symlink_to(shutil.which(tool))
    log = tmp_path / "log"

    def stand_in(name: str, body: str = "") -> None:
        (bin_ / name).write_text(STAND_IN.format(name=name, body=body))
        (bin_ / name).chmod(0o755)

    for name in have:
        stand_in(name, "" if name != "bwrap" or bwrap_ok else "exit 1")
    made = {"chromium": 'printf "#!/bin/bash\\n" > "$BIN/chromium"; chmod +x "$BIN/chromium"',
            "bubblewrap": 'printf "#!/bin/bash\\n" > "$BIN/bwrap"; chmod +x "$BIN/bwrap"'}
    stand_in("apt-get", ('[ "$1" = install ] || exit 0\n'
                         + ("\n".join(f'[[ " $* " == *" {p} "* ]] && {{ {c}; }}'
                                      for p, c in made.items()) + "\nexit 0"
                            if install else "exit 100")))
    stand_in("python3", VENV + '[ "$FAIL" != python3 ]')
    env = {"PATH": str(bin_), "LOG": str(log), "BIN": str(bin_), "FAIL": fail,
           "HOME": str(tmp_path)}
    proc = subprocess.run([shutil.which("bash"), str(root / ".ci" / "run")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)
    called = log.read_text().splitlines() if log.exists() else []
    return proc, [line.split()[0] for line in called]


ALL = {"chromium", "bwrap"}
STEPS = ["python3", "pip", "torchgrade", "ruff", "mypy", "python"]


def test_ci_runs_every_step_when_all_is_there(tmp_path):
    proc, called = harness(tmp_path, have=ALL)
    assert proc.returncode == 0, proc.stderr
    assert called == ["bwrap", *STEPS]


def test_ci_installs_a_missing_package_and_goes_on(tmp_path):
    proc, called = harness(tmp_path, have={"bwrap"})
    assert proc.returncode == 0, proc.stderr
    assert called == ["apt-get", "apt-get", "bwrap", *STEPS]


@pytest.mark.parametrize("have, missing", [({"bwrap"}, ["chromium"]),
                                           ({"chromium"}, ["bubblewrap"]),
                                           (set(), ["chromium", "bubblewrap"])])
def test_ci_fails_when_a_package_cannot_be_installed(tmp_path, have, missing):
    """It printed a warning and went on: the browser or full-isolation tests skipped, green."""
    proc, called = harness(tmp_path, have=have, install=False)
    assert proc.returncode != 0
    assert f"package(s) {' '.join(missing)} could not be installed" in proc.stderr
    assert "python3" not in called  # before anything is set up


def test_ci_fails_when_bubblewrap_cannot_build_a_sandbox(tmp_path):
    proc, called = harness(tmp_path, have=ALL, bwrap_ok=False)
    assert proc.returncode != 0 and "cannot build a sandbox" in proc.stderr
    assert "python3" not in called


@pytest.mark.parametrize("fail", ["python3", "pip", "torchgrade"])
def test_ci_stops_at_the_set_up_step_that_fails(tmp_path, fail):
    """A failed step of `venv && pip install && demo` did not stop the script: it failed
    later, at ruff."""
    proc, called = harness(tmp_path, have=ALL, fail=fail)
    assert proc.returncode != 0
    assert called[-1] == fail and "ruff" not in called
