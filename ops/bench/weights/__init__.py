"""Probes of the weight transport (`slca/weights/`): what reading or writing a weight version costs. Run as
modules (`python -m ops.bench.weights.<name>`); each says in its docstring what it measures and where its figures
were recorded."""
