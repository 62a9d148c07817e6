"""Jobs, schedules and sensors, one module per domain (each exposes its ``defs``)."""
