// Replaced by the reducer sources.
