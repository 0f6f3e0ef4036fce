"""Fix builders: format-preserving config edits and kernel patches for live models.

Empty until the fixer issue lands; findings carry ``fixes=()`` and a ``fix_hint`` until then.
"""
