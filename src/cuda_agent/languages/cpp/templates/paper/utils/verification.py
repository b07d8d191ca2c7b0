"""FIXED FILE (protected). `python3 -m utils.verification`: correctness on the device."""
import sys

from utils._run import run

if __name__ == "__main__":
    sys.exit(run("evaluate", "--no-timing"))
