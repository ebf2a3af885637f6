"""Trace analysis on top of the reader: metrics, diagnosis, proposals, comparison, report."""
