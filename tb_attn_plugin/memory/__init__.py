"""Memory: where attention's memory goes, from profiler [memory] events and CUDA allocator snapshots."""
