import sys

from slca import early_stop

early_stop.install()  # first: a stop while the imports below run is a clean stop for a service (early_stop.py)

try:
    from slca.cli import main
except BaseException as exc:  # noqa: BLE001 — a stop may arrive wrapped (early_stop.stop_in); anything else re-raised
    stop = early_stop.stop_in(exc)
    if stop is None:
        raise
    sys.exit(stop.report())

sys.exit(main())
