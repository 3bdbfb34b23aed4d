"""Quantization sweeps: quantize, evaluate, measure, Pareto frontiers, recommend."""
