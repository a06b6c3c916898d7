import sys

from slca.cli import early_stop

early_stop.install()  # first: a stop while the imports below run is a clean stop for a service (early_stop.py)

from slca.cli import main  # noqa: E402

sys.exit(main())
