#!/usr/bin/env python3
"""The Python remote worker, now the package media_jobs.worker (clients/python).

This file stays for existing deployments: it runs `python3 -m media_jobs.worker` with the same
flags, placeholders, environment, progress lines and exit codes (docs/workers.md):

    python3 worker.py --url https://jobs.example.com --token mjw_... --job-type upscale -- \\
        python3 upscale.py {source} {output}.png

It uses the package from this repository's clients/python when run from a clone, else an
installed one (`pip install --no-build-isolation ./clients/python`).
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_CLONE = os.path.join(_HERE, os.pardir, os.pardir, "clients", "python")
if os.path.isdir(os.path.join(_CLONE, "media_jobs")):
    sys.path.insert(0, os.path.normpath(_CLONE))

from media_jobs.worker import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(prog="worker.py"))
