"""Rules for distributed training: collectives and point-to-point communication."""
