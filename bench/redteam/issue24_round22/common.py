"""Round 22's driver: the red team's one (`bench/redteam/driver.py`), with its files under /tmp/rt22-*."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import driver  # noqa: E402

driver.use("rt22", Path(__file__).resolve().parent)
from driver import *  # noqa: E402,F401,F403
