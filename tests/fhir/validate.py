"""Validates FHIR R4 resources with fhir.resources (its R4B models, which R4's
ClaimResponse and ExplanationOfBenefit validate against unchanged).

Usage: validate.py FILE...   Each file holds one JSON resource. Exit 0 when every one
is valid; otherwise each error is printed and the exit status is 1.
"""

import json
import sys

from fhir.resources.R4B import get_fhir_model_class


def main(paths):
    failed = False
    for path in paths:
        with open(path, encoding="utf-8") as fd:
            data = json.load(fd)
        try:
            model = get_fhir_model_class(data["resourceType"])
            model.model_validate(data)
        except Exception as e:  # every failure is reported, whatever its kind
            failed = True
            print(f"{path}: {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
