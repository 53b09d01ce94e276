"""Benchmarks: each runs zkstore's operation and a raw baseline in the same process, on the same
servers, and prints the ratio against the goal in DESIGN.md. Run all: ``python -m benchmarks``.
"""
