"""The ``bench`` command group: the one layer that imports several designs; flags and terminal output live here."""
