"""What every benchmark shares: the device options and clock (`device`), random-weight model shapes
by name (`shapes`). The FLOP counts and the measured peaks are `memorag.roofline`."""
