"""Text: how numbers, times and words are written for people (units, words) and JSON for strict parsers (json_text)."""
