"""Auditing the log: checks that it is whole and unaltered, and moving it in and out as JSON Lines.

The read models are compared with a rebuild by ``services.rebuild`` (its ``scratch`` module): this package
sits above it, and builds no read model of its own."""
