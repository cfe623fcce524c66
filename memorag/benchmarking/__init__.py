"""What every benchmark shares: the device options and clock (`device`), random-weight model shapes
by name (`shapes`), a decoding timed round by round (`rounds`), crafted hostile documents
(`hostile_documents`). The FLOP counts and the measured peaks are `memorag.benchmarking.roofline`."""
