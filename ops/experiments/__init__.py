"""Experiment harnesses that compose the components: the controlled `slca train` run and the in-process server
it drives (ops is the one package allowed to import serve, sim, workers and learner together)."""
