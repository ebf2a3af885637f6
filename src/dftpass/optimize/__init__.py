"""``dftpass optimize``: apply a proposal, run it, prove it computes the same, measure it, keep
it or put it back.

* :mod:`~dftpass.optimize.measure`: medians, spreads, and the decision rule (a gain outside
  the noise, on the whole run and in the steady state);
* :mod:`~dftpass.optimize.change`: from a proposal of the analysis to an edit of a copy of
  the source (:mod:`dftpass.proposals.codemods`) or of the run's environment;
* :mod:`~dftpass.optimize.loop`: the loop itself, the optimized copy, the patch and
  ``optimize.json``.
"""
