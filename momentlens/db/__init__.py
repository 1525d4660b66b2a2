"""PostgreSQL backend that can start the embedded dev server on first connect."""
