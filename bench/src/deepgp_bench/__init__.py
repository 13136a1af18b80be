"""UCI benchmark: runner over datasets × models × methods × splits, and the report against the paper."""
