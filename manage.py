#!/usr/bin/env python
import sys

from jobqueue.cli import main

if __name__ == "__main__":
    main(sys.argv)
