"""Judgement: rules read the model (snapshot, derived topology, parsed logs, nccl-tests comparison) and
produce findings with evidence and a fix. They never touch the machine and never import ``topodoc.probe``.

Public API::

    from topodoc.rules.engine import Facts, evaluate, rule, Hit, Evidence, Severity, MissingFacts
    from topodoc.rules.registry import RULES, get

    report = evaluate(Facts(snapshot=..., topology=..., logs=..., nccl_tests=...), RULES)
    report.findings / report.skipped / report.errors

A new rule module defines checks with ``@rule(...)``, a ``RULES`` tuple, and a doc per rule in
``docs/<id>.md``; ``registry.RULES`` lists the modules explicitly.
"""
