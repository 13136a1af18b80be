"""Data: the UCI regression sets by name (:mod:`.uci`) and the paper's synthetic "DGP" letters (:mod:`.letters`)."""
from .letters import letters_grid, letters_log_density, load_letters  # noqa: F401
from .uci import download_uci, list_uci, load_split, load_uci, split_data, standardise  # noqa: F401
