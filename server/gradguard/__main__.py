import sys

from gradguard.cli import main

sys.exit(main())
