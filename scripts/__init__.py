"""Runnable jobs: the quota sync worker and the benchmarks."""
