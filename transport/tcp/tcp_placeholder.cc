// Replaced by the TCP backend.
