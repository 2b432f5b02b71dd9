"""``python -m kubectl_nettraffic``: the kubectl plugin, as ``kubectl nettraffic`` runs it."""

import sys

from kubectl_nettraffic.cli.main import main

sys.exit(main())
