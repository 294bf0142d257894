"""What a machine should deliver: per-link figures, per-pair bottlenecks, expected busbw, TP estimate."""
