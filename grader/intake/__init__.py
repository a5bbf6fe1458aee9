"""Stage 1, intake: finding, reading, decoding and fingerprinting submissions; the assignment
file and roster."""
