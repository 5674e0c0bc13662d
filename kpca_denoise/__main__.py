import sys

from .entry import main

if __name__ == "__main__":  # guarded: the GUI's worker process may import this module
    sys.exit(main())
