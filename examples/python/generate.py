#!/usr/bin/env python3
"""Generates the Python gRPC stubs from ../../proto into gen/ (or --out).

Run it with the interpreter that has requirements.txt installed:
    python generate.py
"""

import argparse
import pathlib
import sys

from grpc_tools import protoc

HERE = pathlib.Path(__file__).resolve().parent
PROTO_ROOT = HERE.parent.parent / "proto"
PROTO = "inquest/v1/investigations.proto"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default=str(HERE / "gen"), help="output directory")
    args = parser.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # grpc_tools ships the well-known types (google/protobuf/timestamp.proto).
    well_known = pathlib.Path(protoc.__file__).parent / "_proto"
    code = protoc.main(
        [
            "grpc_tools.protoc",
            f"-I{PROTO_ROOT}",
            f"-I{well_known}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            PROTO,
        ]
    )
    if code != 0:
        print(f"protoc failed ({code})", file=sys.stderr)
        return 1
    print(f"stubs written to {out / 'inquest' / 'v1'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
