"""Trace: reading any kineto trace (plain, gzip, streamed, remote), scanning and decoding its events, and linking kernels to ops."""
