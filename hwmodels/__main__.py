"""``python -m hwmodels list|show NAME|check NAME --tflops T --tbps B``."""

import sys

from .cli import main

sys.exit(main())
