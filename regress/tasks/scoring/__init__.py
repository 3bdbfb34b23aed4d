"""Scoring generated answers: validators and the sandbox for model-written code."""
