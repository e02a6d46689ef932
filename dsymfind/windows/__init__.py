"""Windows' side: PE and PDB identity, cabinets, symbol paths and symbol-store conventions."""
