"""Blurring, encoding and the versioned files of a photo."""
