"""Collecting a sweep's cells into tables beside the paper's numbers."""
