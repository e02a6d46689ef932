"""Windows' side: PE and PDB identity, cabinets (CAB, LZX), portable PDBs."""
