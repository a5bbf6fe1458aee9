"""Bug hunts: seeded faults in working-looking training scripts.

Each file here is a working-looking training script with seeded faults (its docstring says how
many, and what the grader calls). The student fixes them in place; the hidden checks award
points per fault fixed, and the feedback names, for every fault still present, its symptom and
the check that saw it. Faults are drawn from a catalogue (`grader/course/faults.toml`: id, title,
symptom, cause, fix, the checks that detect it). The catalogue holds at least the pitfalls its
`pitfalls` list names; each fault in it must be detected by the hidden checks when injected
into a correct script (this is tested).

Besides its faults, every script is judged end to end: its own `run(seed=0)`, with the grader's
seed and data, must train every parameter of its network (those its docstring freezes stay
as they are), train on the training samples and validate on the validation samples its
docstring names (never on both), keep every sample with its own label, and learn about as well
as the fixed script does. A fix that breaks one of these loses points even if every fault is
fixed.
"""
