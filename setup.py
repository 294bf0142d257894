"""Packaging glue that pyproject.toml cannot express: the host recordings in fixtures/hosts/ ship
inside the package as ``topodoc._examples``, so after ``pip install`` anyone can run
``topodoc examples`` and ``--from example:<name>`` without a GPU server."""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["topodoc", "topodoc.*"]) + ["topodoc._examples"],
    package_dir={"topodoc._examples": "fixtures/hosts"},
)
