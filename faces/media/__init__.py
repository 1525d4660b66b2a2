"""Animated images and videos (docs/ARCHITECTURE.md §11): frames in, detections over time, files out."""
