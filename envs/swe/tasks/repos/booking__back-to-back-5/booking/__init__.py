"""Room bookings."""
