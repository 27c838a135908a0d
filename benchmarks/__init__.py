"""claude-nvim's benchmarks: ``python -m benchmarks.bench`` from the repository's root."""
