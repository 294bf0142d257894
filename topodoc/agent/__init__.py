"""``topodoc agent``: the ``diagnose`` computation on a schedule, hardware events, NCCL log tail, export.

The agent adds only scheduling, state, diffs, events and exporters to what ``diagnose`` computes:

- :mod:`.cycle` — one probe -> derive -> evaluate cycle, with the same functions ``diagnose`` uses;
- :mod:`.state` — each finding new / open / resolved with first-seen and last-seen times;
- :mod:`.sources` — the event-source seam: live (pyudev ``Monitor``, ``/dev/kmsg``) and replay;
- :mod:`.events` — kernel/udev events joined to the derived topology, kept in a ring buffer;
- :mod:`.logtail` — ``--watch-log`` files followed across rotation and truncation, analysed per file;
- :mod:`.runner` — the scheduler, threads, signals and exporters (HTTP in :mod:`.http`);
- metrics are rendered by :mod:`topodoc.report.prometheus`.
"""
