"""One module per command of `torchgrade` (`grader.cli` wires them)."""
