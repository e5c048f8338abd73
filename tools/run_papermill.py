"""papermill, with tools/zmq_poll_fix applied (a lost wake-up can otherwise hang a run forever).

    .venv/bin/python tools/run_papermill.py IN.ipynb OUT.ipynb [papermill's options]
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import zmq_poll_fix  # noqa: E402

zmq_poll_fix.apply()

from papermill.cli import papermill  # noqa: E402

if __name__ == "__main__":
    papermill()
