"""Rebuilding the read models into a new generation of tables while the old one keeps serving, then switching.

``replay`` drives a rebuild, ``parallel`` and ``parallel_worker`` split a large one across processes, ``some``
picks the projections to fold again, ``diff`` compares two generations, ``scratch`` folds the log into a
scratch database up to given positions (what ``claimlog verify`` compares with); the generations themselves and the bulk build of their indexes are the
store's (``services.store``). Modules here may import ``events``, ``projections``, ``services.log``,
``services.store``, ``services.projector`` and ``services.runtime``; not ``services.cli``.
"""
