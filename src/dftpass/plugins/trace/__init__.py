"""Runtime rules: checks on a traced run (ML-R15, ML-R16, ML-R24)."""
