"""The vocabularies: each parses and validates what users write into engine steps."""
