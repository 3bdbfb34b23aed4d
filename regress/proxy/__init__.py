"""Small proxy suites drawn by the reference's margin, and `selftest`."""
