"""Data: the UCI regression sets by name (:mod:`.uci`) and the paper's synthetic "DGP" letters (:mod:`.letters`)."""
