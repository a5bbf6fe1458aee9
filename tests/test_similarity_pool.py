"""`torchgrade similarity -j N` on a class large enough for its pool (processes: not in the fast
tier): the same CSV as one process reads."""

from __future__ import annotations

from grader.commands import similarity as command
from grader.commands.similarity import similarity
from similarity_class import make_class, write_class


def test_a_pool_reads_the_class_to_the_same_result(tmp_path):
    students = make_class(copies=8, stubs=4)
    assert len(students) >= command.POOL_MIN
    write_class(students, tmp_path / "class")
    alone = similarity(tmp_path / "class", out=tmp_path / "one", jobs=1)
    pooled = similarity(tmp_path / "class", out=tmp_path / "two", jobs=2)
    assert pooled.flagged and pooled.pairs == alone.pairs
    assert (tmp_path / "one" / "similarity.csv").read_text() == \
        (tmp_path / "two" / "similarity.csv").read_text()
