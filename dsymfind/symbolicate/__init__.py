"""`dsymfind symbolicate`: crash reports and addresses to function names, inlined frames and
source lines. Only that command imports this package, and it alone loads `symbolic`."""
