"""Read models: pure folds of events into views, and the SQL tables that hold them.

Nothing here opens an engine or a session: the projector passes a connection in.
"""
