"""FIXED FILE (protected). `python3 -m utils.profiling`: times against eager and torch.compile."""
import sys

from utils._run import run

if __name__ == "__main__":
    sys.exit(run("evaluate"))
