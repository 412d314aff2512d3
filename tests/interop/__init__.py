"""Interoperability vectors: claimlog's ``tlog/`` against golang.org/x/mod/sumdb (``make vectors``)."""
