"""Reading a snapshot: scan planning into splits, merge-on-read of each split, predicates."""
