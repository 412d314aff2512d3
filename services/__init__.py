"""claimlog's deployable processes, on top of the pure layers ``events`` and ``projections``.

Packages: ``log`` (the only JetStream code), ``commands`` (the write side), ``projector``, ``rebuild``
(read models rebuilt into generations), ``timeline``, ``audit``, ``read_api``, ``ingest``, ``runtime``
(running the processes and their settings) and ``cli`` (the ``claimlog`` command), with ``actors``,
``client`` and ``asyncapi`` beside them. ``services`` may import ``events`` and ``projections``; they import
nothing of it. ``tests/unit/test_import_graph.py`` keeps the layers, and keeps the modules free of cycles.
"""
