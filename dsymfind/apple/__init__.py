"""Apple's side: Mach-O identity, dSYM bundles, crash reports."""
