"""Bug hunts: seeded faults in working-looking training scripts.

Each file here is a working-looking training script with seeded faults (its docstring says how
many, and what the grader calls). The student fixes them in place; the hidden checks award
points per fault fixed, and the feedback names, for every fault still present, its symptom and
the check that saw it. Faults are drawn from a catalogue (`grader/course/faults.toml`: id, title,
symptom, cause, fix, the checks that detect it). The catalogue holds at least the pitfalls its
`pitfalls` list names; each fault in it must be detected by the hidden checks when injected
into a correct script (this is tested).
"""
