"""The work behind each fan-out task and the coordinator's I/O around the pure state machine."""
