"""Why attention is fast or slow: a roofline per layer and stage, and a speed-up split between two runs."""
