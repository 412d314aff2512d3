"""Running claimlog's processes as one: ``claimlog up`` and what it needs above the services it runs.

``up`` (NATS, migrations, the projector's workers and the API as one tree), ``supervisor`` (each child
restarted with backoff), ``nats_children`` (the nats-servers ``up`` starts, reaped and started again),
``preflight`` (every check that can refuse a start, run before anything is made), ``readiness`` (waiting
for the API to answer), ``projector_process`` (the projector's process: it rebuilds stale read models
before folding, so it stands above both ``services.projector`` and ``services.rebuild``). It sits above the packages whose processes it runs (``services.ingest`` for the
sample pages, ``services.store`` for the generations); nothing below imports it. Modules here may import
``events``, ``projections`` and the other packages of ``services``; not ``services.cli``.
"""
