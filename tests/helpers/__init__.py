"""Helpers that several test modules share, by topic: test modules import them from here, never from each other."""
