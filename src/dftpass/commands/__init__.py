"""The subcommands of ``dftpass``; :mod:`dftpass.cli` builds the parser and dispatches."""
