"""`slca eval`: in-domain test split and BFCL (offline, BFCL's own ast_checker)."""
