"""Ranks of one distributed job: which trace is which rank, and how the ranks' attention differs."""
