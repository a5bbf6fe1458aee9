"""Text from a hostile peer made writable: shared by the wire decoder and the result models.

Imports nothing heavy: the result models use it in processes that never start torch.
"""

from __future__ import annotations

import re

_SURROGATES = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """`text` with every lone surrogate (what a JSON `\\ud800` escape or a surrogate-escaped
    file name leaves in a str) replaced by U+FFFD, so that it can be written as UTF-8."""
    if text.isascii() or _SURROGATES.search(text) is None:
        return text
    return _SURROGATES.sub("\ufffd", text)
