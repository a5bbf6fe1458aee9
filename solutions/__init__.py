"""Reference solutions: every check passes on them (proven by tests/)."""
