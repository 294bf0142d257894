"""Fleet comparison: the odd node out across many servers that should be identical.

``nodes`` loads each input (recording, ``probe --json`` snapshot, agent document or URL) into a
fingerprint (``fingerprint``), in parallel; ``compare`` finds each property's majority and every node
that differs; ``raillog`` reads NCCL logs from many nodes into a rail map. Output is rendered by
``topodoc.report.fleet``. Everything here is a pure function of the inputs.
"""
