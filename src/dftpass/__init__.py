"""dftpass: instrument ML/DL Python projects with dftracer, run them traced, read the traces.

The package is a compiler-pass pipeline: :mod:`dftpass.core` holds the pass manager,
project model, call graph, edit engine and the one module that spells dftracer's API;
:mod:`dftpass.plugins` holds the built-in passes, one ML-R rule per file.
"""

__version__ = "0.1.0"
