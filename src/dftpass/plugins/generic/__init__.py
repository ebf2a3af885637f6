"""Generic regions: dft_fn loggers on the functions worth an event."""
