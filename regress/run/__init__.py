"""Running a suite: requests to a backend, records out, cached and costed."""
