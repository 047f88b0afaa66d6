"""The `autotune` command installed with the package: runs the command built with the library."""

import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "autotune")
    os.execv(exe, [exe] + sys.argv[1:])
