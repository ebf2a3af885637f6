"""Rules for checkpoints: capture/restart regions, their I/O phases."""
