"""Shared test set-up: makes tests/support.py importable as ``support``."""
