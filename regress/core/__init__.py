"""The records and their store: what a run is, on disk and in memory. Imports nothing above it."""
