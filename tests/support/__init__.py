"""What the tests share, one copy each: rows and uploads (factories), the queue (queue_helpers), waiting
(waiting), a photo's stored files (stored_files), samples of every upload kind, and readings of published files.

No test lives here: pytest collects nothing from this package.
"""
