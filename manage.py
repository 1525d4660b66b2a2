#!/usr/bin/env python
import sys

from momentlens.cli import main

if __name__ == "__main__":
    main(sys.argv)
