"""Apple's side: Mach-O identity and structure, dSYM bundles, plists, archives, crash reports."""
