"""Small shared helpers: text input that never loses lines, atomic outputs."""
