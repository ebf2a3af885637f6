"""Rules for compute: forward, backward, optimizer step."""
