"""Jobs, sensors and schedules."""
