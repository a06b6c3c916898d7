import sys

from slca.cli import main

sys.exit(main())
