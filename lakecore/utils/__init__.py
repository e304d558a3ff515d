"""Small helpers every layer may use: Arrow grouping (``arrow``), crash points (``faults``)
and the clocks of ``now`` arguments (``clock``)."""
