"""What an instructor hands out: the student release, its leak scan, recorded visible checks,
notebooks."""
