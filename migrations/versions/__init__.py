"""Migration scripts, oldest first (a package so it ships with the wheel)."""
