"""Round 30's driver: the red team's one (`bench/redteam/driver.py`), files under /tmp/rt30-*, results here."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import driver  # noqa: E402

driver.use("rt30", Path(__file__).resolve().parent)
from driver import *  # noqa: E402,F401,F403
