"""Which students' files of one exercise share work, beyond the starter code.

Each file is a set of fingerprints (`grader.similarity.fingerprints`) of its normalised tokens
(`grader.similarity.normalise`), less every fingerprint whose k-gram is also one of the starter
code's: the stub's code, and the code its docstrings show, with every name the student chose
counted as one (`normalise.loose`). What is left is the student's own work; an untouched stub
has none.

The similarity of two files is the share of the smaller one's own fingerprints that the other
holds too (their containment: a copy padded with extra code is still a copy; a partial copy
scores the share copied). A pair is flagged when they share at least `MIN_SHARED`
fingerprints (two students who each filled in one obvious line are not) and it is at least
`THRESHOLD`, or they share `MANY_SHARED` (a long passage copied into a file of one's own).

Memory is bounded by the fingerprints, never by the pairs: an inverted index (fingerprint ->
the students who have it) gives each student's row of shared counts in O(class size), one
row at a time, and only the flagged pairs and each student's closest classmate are kept. A
fingerprint that more than `common_cutoff(n)` students of the class have is left out, as
MOSS leaves out passages that many programs share: it is common knowledge (or a class-wide
leak), not a pair's, and it would make the rows quadratic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from grader.similarity.fingerprints import K, kgram_hashes, regions, winnow_positions
from grader.similarity.normalise import Tokens, contract_names, docstring_code, loose, normalised

# Chosen between measured distributions (docs/similarity.md): independent correct solutions in
# deliberately different styles score at most 0.23 (39 fingerprints shared), but solutions in
# the plain style most students write, each written apart, reach 0.38 with 74-75 shared (a
# tester's held-out class, against each other and the reference solution), and a half-finished
# plain solution 0.45 with 29 shared; a copy and its source score 1.0 however renamed,
# reordered, reformatted or re-commented, half of a classmate's functions beside one's own 0.49
# (91 shared) and up. 0.40 and at least 40 shared keep every independent pair measured out;
# what they give up: a copy of under 40% of the smaller file's own work (a patchwork of two
# classmates is flagged with the one it took most from).
THRESHOLD = 0.40
MIN_SHARED = 40       # fingerprints: about 100 tokens, ten lines of code
# Whatever the share: independent solutions shared at most 75 fingerprints; a passage of about
# 25 lines copied into a file of one's own shares 100.
MANY_SHARED = 100
COMMON_FRACTION = 0.1  # of the class; and never fewer than COMMON_MIN students
COMMON_MIN = 50


def common_cutoff(students: int) -> int:
    """A fingerprint more than this many students share is common, not a pair's."""
    return max(COMMON_MIN, math.ceil(COMMON_FRACTION * students))


@dataclass(frozen=True)
class Starter:
    """An exercise's starter code, as the loose k-gram hashes it is recognised by, and the
    names its contract keeps."""

    exercise: str
    contract: frozenset[str]
    hashes: np.ndarray  # sorted, unique, int64

    @classmethod
    def of(cls, exercise: str, stub: str) -> Starter:
        """From the stub's text. (The release's notebook of the exercise is the stub's code
        cut into cells, less its docstrings: the same tokens once sorted, so nothing more.)"""
        contract = frozenset(contract_names(stub))
        parts = [stub, *docstring_code(stub)]
        hashes = [kgram_hashes(loose(normalised(p, contract=contract).text)) for p in parts]
        return cls(exercise, contract, np.unique(np.concatenate(hashes + [np.empty(0, np.int64)])))


@dataclass(frozen=True)
class Own:
    """A file's own work: its normalised tokens and which of them are starter code, the hash
    of the k-gram at each position and which k-grams touch starter code (not its own)."""

    tokens: Tokens
    starter_tokens: np.ndarray  # bool, by token
    hashes: np.ndarray
    starter: np.ndarray  # bool, by k-gram position

    def fingerprints(self) -> np.ndarray:
        """Its winnowed fingerprints that are not starter code: sorted, unique."""
        positions = winnow_positions(self.hashes)
        positions = positions[~self.starter[positions]]
        return np.unique(self.hashes[positions])


def own_work(source: str, starter: Starter) -> Own:
    """`source` normalised and fingerprinted, its starter code marked (see `Own`)."""
    tokens = normalised(source, contract=starter.contract)
    hashes = kgram_hashes(tokens.text)
    if len(hashes) == 0:
        return Own(tokens, np.zeros(len(tokens.text), dtype=bool), hashes,
                   np.zeros(0, dtype=bool))
    starter_kgram = np.isin(kgram_hashes(loose(tokens.text)), starter.hashes)
    # A k-gram is the student's own only when none of its tokens is starter code: one that
    # reaches past the stub's code by a few tokens (the line after a signature, the branch of
    # a case the contract spells out) says little about who wrote what. (Measured: it halves
    # what independent solutions of a short exercise share, and leaves copies as they were.)
    edges = np.zeros(len(tokens.text) + 1, dtype=np.int64)
    np.add.at(edges, np.flatnonzero(starter_kgram), 1)
    np.add.at(edges, np.flatnonzero(starter_kgram) + K, -1)
    starter_token = np.cumsum(edges)[:len(tokens.text)] > 0
    touched = np.convolve(starter_token, np.ones(K, dtype=np.int64), mode="valid") > 0
    return Own(tokens, starter_token, hashes, touched)


@dataclass(frozen=True)
class Pair:
    """Two students' files of one exercise (`a` < `b`): how similar, how many fingerprints
    they share, and whether that is flagged."""

    exercise: str
    a: str
    b: str
    similarity: float
    shared: int
    flagged: bool


def compare_class(exercise: str, fingerprints: dict[str, np.ndarray]) -> list[Pair]:
    """Every flagged pair of the students in `fingerprints` (student -> their file's own
    fingerprints), and each student's closest classmate (highest similarity, then most
    shared, then first id; a student with no work of their own, an untouched stub, is paired
    with the first other id at 0); most similar first."""
    students = sorted(fingerprints)
    n = len(students)
    if n < 2:
        return []
    sizes = np.array([len(fingerprints[s]) for s in students], dtype=np.int64)
    owner = np.repeat(np.arange(n), sizes)
    flat = np.concatenate([fingerprints[s] for s in students]) if sizes.sum() else \
        np.empty(0, np.int64)
    order = np.argsort(flat, kind="stable")
    flat, owner = flat[order], owner[order]
    unique, first, counts = np.unique(flat, return_index=True, return_counts=True)
    rare = counts <= common_cutoff(n)
    # Each student's own fingerprints that are not common: the denominator of their scores.
    mine = [fingerprints[s][rare[np.searchsorted(unique, fingerprints[s])]]
            for s in students]
    own = np.array([len(m) for m in mine], dtype=np.int64)
    kept: dict[tuple[int, int], Pair] = {}
    for i in range(n):
        if own[i] == 0:  # nothing of their own (an untouched stub): closest to none
            key = (0, 1) if i == 0 else (0, i)
            kept.setdefault(key, Pair(exercise, students[key[0]], students[key[1]], 0.0, 0,
                                      False))
            continue
        at = np.searchsorted(unique, mine[i])
        starts, lengths = first[at], counts[at]
        total = int(lengths.sum())
        # the positions of every posting of i's fingerprints in `owner`, without a loop
        index = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(total)
        shared = np.bincount(owner[index], minlength=n)
        shared[i] = 0
        smaller = np.minimum(own, own[i])
        similarity = np.where(smaller > 0, shared / np.maximum(smaller, 1), 0.0)
        flagged = np.flatnonzero(is_flagged(similarity, shared))
        similarity[i] = -1.0
        best = int(np.lexsort((np.arange(n), -shared, -similarity))[0])
        for j in {*flagged.tolist(), best}:
            key = (min(i, j), max(i, j))
            if key not in kept:
                kept[key] = Pair(exercise, students[key[0]], students[key[1]],
                                 round(float(similarity[j]), 4), int(shared[j]),
                                 bool(is_flagged(similarity[j], shared[j])))
    return sorted(kept.values(), key=lambda p: (-p.similarity, -p.shared, p.a, p.b))


def is_flagged(similarity: Any, shared: Any) -> Any:
    """Whether pairs with these scores and shared counts (numbers or arrays) are flagged."""
    return (shared >= MIN_SHARED) & ((similarity >= THRESHOLD) | (shared >= MANY_SHARED))


@dataclass(frozen=True)
class Side:
    """One file of a pair for the page: each original line's number and how it is shown."""

    matched: frozenset[int]   # lines with a token of a region the other file shares
    starter: frozenset[int]   # lines whose every compared token is starter code
    compared: frozenset[int]  # lines with a token at all (not a comment, docstring, blank)


def sides(left: Own, right: Own) -> tuple[Side, Side]:
    """Which lines of each file match the other (its own work only: k-grams that are not
    starter code, as `Own.fingerprints` counts them, here every one rather than the winnowed)
    and which are starter code."""
    return _side(left, right), _side(right, left)


def _side(this: Own, other: Own) -> Side:
    theirs = other.hashes[~other.starter]
    hit = np.flatnonzero(np.isin(this.hashes, theirs) & ~this.starter)
    lines = this.tokens.lines
    matched = {lines[t] for start, end in regions(hit) for t in range(start, min(end, len(lines)))}
    by_line: dict[int, bool] = {}
    for t, line in enumerate(lines):
        by_line[line] = by_line.get(line, True) and bool(this.starter_tokens[t])
    return Side(frozenset(matched), frozenset(ln for ln, all_starter in by_line.items()
                                              if all_starter), frozenset(by_line))
