"""``claimlog audit URL``: an outsider's check of a registry's transparency log, over HTTP only.

It imports ``tlog/`` and ``events/`` (and ``client.py``'s kind of HTTP), never anything that talks to
NATS or a database (``tests/unit/test_package_graph.py`` holds it so): it knows only what anyone can.
"""
