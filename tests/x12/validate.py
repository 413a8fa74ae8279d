"""Validates X12 documents against their HIPAA implementation guides with pyx12.

Usage: validate.py FILE...   Exit 0 when every file is valid; otherwise each error
is printed as `FILE: segment ...: message` and the exit status is 1.
"""

import logging
import sys

import pyx12.error_handler
import pyx12.params
import pyx12.x12n_document


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.ERROR)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def validate(path):
    handler = Collect()
    logger = logging.getLogger("pyx12")
    logger.addHandler(handler)
    logger.setLevel(logging.ERROR)
    try:
        params = pyx12.params.params()
        with open(path, encoding="ascii") as fd:
            ok = pyx12.x12n_document.x12n_document(params, fd, fd_997=None, fd_html=None)
    finally:
        logger.removeHandler(handler)
    return ok, handler.messages


def main(paths):
    failed = False
    for path in paths:
        ok, messages = validate(path)
        if not ok or messages:
            failed = True
            for m in messages or ["pyx12 rejected the document"]:
                print(f"{path}: {m}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
