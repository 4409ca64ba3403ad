"""Data layer: the engine cache (connect), engines and sessions (engine), faults as one sentence
(errors), tables (models), migrations (migrate, migrations/)."""
