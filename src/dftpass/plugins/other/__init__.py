"""Rules for what is neither data, compute nor checkpoints: configuration, stats and log files."""
