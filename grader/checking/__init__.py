"""Stage 2, checking: the checks' registry and selection, the pytest plugin, the `sub` fixture
and its student proxy, the comparisons checks use."""
