"""Time and interval arithmetic: parsing and formatting instants (times), interval units, crons and spans (intervals)."""
