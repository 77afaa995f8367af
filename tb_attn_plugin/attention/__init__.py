"""Attention: finding the attention calls in a trace and splitting each into stages (the kernel and op tables)."""
