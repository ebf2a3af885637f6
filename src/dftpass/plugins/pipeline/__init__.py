"""Rules for the training pipeline: phases, epoch and batch loops, step metadata."""
