"""Analyses: cached results other passes ask for with ``ctx.analysis(ID)``."""
