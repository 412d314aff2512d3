"""The read models' store: the generations of tables in the database and which one is active, and the
bulk build that fills a new generation's tables and makes its indexes once.

``generations`` keeps the table sets and the switch between them, ``bulk_build`` the merge and the
indexes. The live projector writes into the active generation and a rebuild into a new one, so both
read them here, below both. Modules here may import ``events``, ``projections`` and
``services.runtime``'s low layer (``db``); nothing of the packages that write or serve the read models.
"""
