"""FIXED FILE (protected). `python3 -m utils.compile`: build kernels/ into cuda_extension."""
import sys

from utils._run import run

if __name__ == "__main__":
    sys.exit(run("build"))
