"""Rules for the data pipeline: samples, preprocessing, I/O."""
