"""What is graded, read by every stage: the exercises and their check files (registry), the fault
catalogue and bug hunts, the edition a release installs."""
