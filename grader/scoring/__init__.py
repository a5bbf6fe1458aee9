"""Stage 4, scoring: a run's check results made into a submission's result (bug hunts' scored
checks, diagnosis, the assignment's weights and late penalty)."""
