"""Benchmark suites read through their own packages: FlashInfer-Bench (`suites.flashinfer`)."""
