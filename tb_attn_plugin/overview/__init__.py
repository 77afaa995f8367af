"""Attention in its step: each profiler step's GPU span split into attention, other work, communication, copies and idle; what limits the step; each call's serving phase."""
