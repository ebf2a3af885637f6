"""The optimization catalogue (catalogue.yaml), read by dftpass.analysis.proposals."""
