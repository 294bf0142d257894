"""Packaging glue that pyproject.toml cannot express: the host recordings in fixtures/hosts/ ship
inside the package as ``topodoc._examples``, so after ``pip install`` anyone can run
``topodoc examples`` and ``--from example:<name>`` without a GPU server; and the log scanner's optional C
core (``topodoc/parsers/nccl_log/_scan.c``): built where a compiler exists, skipped (``optional``) where
none does, the Python scanner then running with the same results. ``TOPODOC_PURE=1`` at build time skips
it too; ``TOPODOC_STRICT_C=1`` makes the build fail instead of skipping it and adds ``-Wall -Wextra
-Werror`` (CI)."""

import os

from setuptools import Extension, find_packages, setup

strict = os.environ.get("TOPODOC_STRICT_C") == "1"
flags = ["-O3"] if os.name != "nt" else []
if strict:
    flags += ["-Wall", "-Wextra", "-Werror"]
extensions = [] if os.environ.get("TOPODOC_PURE") == "1" else [
    Extension("topodoc.parsers.nccl_log._scan", ["topodoc/parsers/nccl_log/_scan.c"],
              extra_compile_args=flags, optional=not strict),
]

setup(
    packages=find_packages(include=["topodoc", "topodoc.*"]) + ["topodoc._examples"],
    package_dir={"topodoc._examples": "fixtures/hosts"},
    ext_modules=extensions,
)
