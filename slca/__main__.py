import sys

from slca import early_stop

early_stop.install()  # first: a stop while the imports below run is a clean stop for a service (early_stop.py)

try:
    from slca.cli import main
except early_stop.StoppedBeforeStart as stop:
    sys.exit(stop.report())

sys.exit(main())
