"""`python -m grader ...` is `torchgrade ...` (for a student release run without installing it)."""

import sys

from grader.cli import main

sys.exit(main())
