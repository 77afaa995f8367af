"""The tb-attn demo: ``python -m demo`` profiles attention variants into runs/ for TensorBoard."""
