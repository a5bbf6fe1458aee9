"""The grader's modules as an installation has them: compiled to bytecode (shared by the
benchmarks' `--bytecode` option)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_bytecode_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bytecode", choices=("as-installed", "as-is"), default="as-installed",
                        help="as-installed (default): compile the grader's and the course's "
                             "modules to bytecode first, as pip does when it installs them; "
                             "as-is: time the tree as it is")


def prepare_bytecode(choice: str) -> None:
    """What `--bytecode` asks for, done."""
    if choice == "as-installed":
        compile_as_installed()


def compile_as_installed() -> None:
    """Compile the grader package and its default course to bytecode (`__pycache__`), as pip
    does for what it installs: a student's installation has it. An editable install under
    PYTHONDONTWRITEBYTECODE=1 (this project's CI machines) has none, and each cold check would
    compile ~100 modules from source (~0.1 s) that no installed copy compiles."""
    import compileall

    import grader
    from grader.course.location import default_root

    for folder in (Path(grader.__file__).parent, default_root()):
        compileall.compile_dir(str(folder), quiet=2)  # samples hold syntax errors on purpose
    print(f"bytecode: compiled as pip installs it ({Path(grader.__file__).parent}, "
          f"{default_root()}); --bytecode as-is times the tree as it is", flush=True)
