"""Small helpers every layer may use: Arrow grouping (``arrow``) and crash points (``faults``)."""
