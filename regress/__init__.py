"""regress: a CI gate that tells whether a change to a small language model made it worse."""

__version__ = "0.1.0"
