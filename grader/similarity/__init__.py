"""Similar hand-ins (`torchgrade similarity`): a class's files of one exercise compared pair
by pair, the course's starter code left out; no student code runs. `normalise` turns a file
into tokens that renaming, reordering, comments, docstrings and layout do not change,
`fingerprints` hashes and winnows them (copydetect's winnowing, MOSS's algorithm), `compare`
scores and flags the pairs in memory bounded by the fingerprints (docs/similarity.md)."""
