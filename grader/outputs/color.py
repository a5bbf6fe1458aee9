"""Whether the terminal summary is coloured. Standard library only: `torchgrade check` decides
it before anything else is imported, where the terminal is (the check server's output is not
one)."""

from __future__ import annotations

import os
import sys
from typing import Literal, TextIO

ColorMode = Literal["auto", "always", "never"]


def use_color(mode: ColorMode, stream: TextIO | None = None) -> bool:
    """Whether to colour: `always`, `never`, or (`auto`) when the stream is a terminal and the
    user did not set NO_COLOR (https://no-color.org) or TERM=dumb."""
    if mode != "auto":
        return mode == "always"
    stream = stream or sys.stdout
    return (hasattr(stream, "isatty") and stream.isatty() and "NO_COLOR" not in os.environ
            and os.environ.get("TERM") != "dumb")
