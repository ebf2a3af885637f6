"""Traced runs: the canonical workspace layout, running a command with tracing, compaction."""
