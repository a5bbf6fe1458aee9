"""Exercise stubs students fill in (CURRICULUM.md is their contract)."""
