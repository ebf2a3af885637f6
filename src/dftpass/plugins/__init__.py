"""Built-in passes. Each ML-R rule is one module; :mod:`dftpass.plugins.builtin` lists them."""
