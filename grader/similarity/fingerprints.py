"""Fingerprints of normalised token sequences, MOSS-style: k-grams of tokens, hashed, winnowed.

The winnowing (Schleimer, Wilkerson and Aiken, "Winnowing: local algorithms for document
fingerprinting", SIGMOD 2003, the algorithm of MOSS) and the turning of matched positions into
regions are copydetect's (`copydetect.utils.winnow`, `get_copied_slices`). The k-gram hashes are
computed here, over the tokens of `grader.similarity.normalise` rather than copydetect's
character filter, and with a keyed digest rather than Python's `hash()`, which is salted per
process: the same class gives the same figures in every run.

With `K` tokens per k-gram and a window of `WINDOW` k-grams, every run of at least
`K + WINDOW - 1` tokens that two files share yields at least one shared fingerprint, and no run
shorter than `K` tokens yields any (a line such as `return v1.T` is noise, not a match).
"""

from __future__ import annotations

import hashlib

import numpy as np

K = 8        # tokens per k-gram: about one line of code
WINDOW = 4   # winnowing window: every shared run of 11 tokens or more is seen

_MULTIPLIER = np.uint64(0x100000001B3)  # the FNV prime: odd, so every k-gram position counts
_token_ids: dict[str, int] = {}
_MAX_TOKEN_IDS = 1 << 20  # distinct token texts remembered (a cache: cleared when full)


LIBRARY = "copydetect"
INSTALL = "pip install 'torchgrade[similarity]'"


def library_missing() -> bool:
    """Whether copydetect, which the `similarity` extra installs, cannot be imported."""
    import importlib.util

    return importlib.util.find_spec(LIBRARY) is None


def token_ids(tokens: list[str]) -> np.ndarray:
    """A 64-bit id per token text, the same in every process (a BLAKE2b digest)."""
    ids = np.empty(len(tokens), dtype=np.uint64)
    for i, text in enumerate(tokens):
        value = _token_ids.get(text)
        if value is None:
            if len(_token_ids) >= _MAX_TOKEN_IDS:
                _token_ids.clear()
            value = int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"),
                                                   digest_size=8).digest(), "little")
            _token_ids[text] = value
        ids[i] = value
    return ids


def kgram_hashes(tokens: list[str]) -> np.ndarray:
    """The hash of every k-gram of `tokens`, by position (`len(tokens) - K + 1` of them, none
    for a shorter sequence), as int64: a polynomial in the token ids, modulo 2**64."""
    n = len(tokens) - K + 1
    if n <= 0:
        return np.empty(0, dtype=np.int64)
    ids = token_ids(tokens)
    hashes = np.zeros(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(K):
            hashes = hashes * _MULTIPLIER + ids[j:j + n]
    return hashes.view(np.int64)


def winnow_positions(hashes: np.ndarray) -> np.ndarray:
    """The positions of the k-grams winnowing selects (MOSS's robust winnowing: in every
    window of `WINDOW` consecutive k-grams, the rightmost smallest hash)."""
    if len(hashes) == 0:
        return np.empty(0, dtype=np.int64)
    from copydetect.utils import winnow  # (the `similarity` extra: see `library_missing`)

    _, positions = winnow(hashes, window_size=WINDOW, remove_duplicates=False)
    return np.asarray(positions, dtype=np.int64)


def regions(positions: np.ndarray) -> list[tuple[int, int]]:
    """Token ranges [start, end) covered by the k-grams at `positions`, merged."""
    if len(positions) == 0:
        return []
    from copydetect.utils import get_copied_slices

    slices = get_copied_slices(np.asarray(positions, dtype=np.int64), K)
    return [(int(a), int(b)) for a, b in zip(slices[0], slices[1])]
