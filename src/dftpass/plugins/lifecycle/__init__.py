"""Rules for the program's lifecycle: one initialization, finalize on every exit."""
